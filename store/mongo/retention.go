package mongo

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// Retention on MongoDB is by TTL indexes, which need BSON dates: each
// document that may expire carries a Date field beside the Unix-nanosecond
// instant the queries use (the dates keep milliseconds, which is all a TTL
// needs). MongoDB's TTL monitor deletes a document once the date is older
// than the index's expireAfterSeconds; documents without the field are
// never deleted, which is how events still in flight and unit leases stay.
//
//   - events: finishedDate, set by the transitions to released or
//     cancelled (and EventCancelPending), removed by a transition out of
//     them (redrive);
//   - idempotency records: createdDate;
//   - audit records: atDate (Options.AuditRetention);
//   - member leases: expiresDate. Unit leases have none: deleting one would
//     restart its fence at 1 and let a stale owner's writes through.
//
// The purge jobs (EventDeleteFinishedBefore, IdempotencyDeleteBefore) stay:
// they are the retention on FerretDB. On MongoDB (RetentionByTTL) the
// application runs them as a backstop only, much less often: for documents
// that carry no Date field (written by a version without them) and for
// whatever the TTL monitor, a single pass every 60 s, falls behind on.

// Date fields read by the TTL indexes.
const (
	fieldFinishedDate = "finishedDate"
	fieldCreatedDate  = "createdDate"
	fieldExpiresDate  = "expiresDate"
)

// memberLeaseGrace is how long an expired or released member lease is kept
// before its TTL index deletes it: long after any balancer has stopped
// counting it, short enough that instances that come and go (a new name per
// process) do not pile up.
const memberLeaseGrace = time.Hour

// ttlSpec is one TTL index. It is partial on the documents that have the
// date, so that events in flight and unit leases take no room in it.
type ttlSpec struct {
	name string
	// old is the name of the earlier, full index on the same field, which
	// is dropped right before this one is built: MongoDB 4.4 refuses a
	// second index on the same keys that differs only in options.
	old   string
	field string
	after time.Duration
}

// ttlSpecs are the TTL indexes, by collection, with the retention of opts.
func ttlSpecs(opts Options) map[string]ttlSpec {
	return map[string]ttlSpec{
		collEvents:      {"finished_partial_ttl", "finished_ttl", fieldFinishedDate, opts.EventRetention},
		collIdempotency: {"created_partial_ttl", "created_ttl", fieldCreatedDate, opts.IdempotencyRetention},
		collLeases:      {"member_expires_partial_ttl", "member_expires_ttl", fieldExpiresDate, memberLeaseGrace},
		collAudit:       {"at_partial_ttl", "", fieldAtDate, opts.AuditRetention},
	}
}

// seconds is the expireAfterSeconds of the spec: whole seconds, rounded up
// so that nothing goes before its retention.
func (t ttlSpec) seconds() int32 {
	return int32((t.after + time.Second - 1) / time.Second)
}

func (t ttlSpec) model() mongo.IndexModel {
	return mongo.IndexModel{
		Keys: bson.D{{Key: t.field, Value: 1}},
		Options: options.Index().SetName(t.name).SetExpireAfterSeconds(t.seconds()).
			SetPartialFilterExpression(bson.D{{Key: t.field, Value: bson.D{{Key: "$exists", Value: true}}}}),
	}
}

// syncTTL sets the expireAfterSeconds of coll's TTL index, if it exists
// with another one, to the configured retention (collMod, which changes it
// in place). Instances started with different retentions take turns: the
// last one started wins.
func (s *Store) syncTTL(ctx context.Context, coll string, have []mongo.IndexSpecification) error {
	if !s.caps.ttl {
		return nil
	}
	want, ok := ttlSpecs(s.opts)[coll]
	if !ok {
		return nil
	}
	for _, sp := range have {
		if sp.Name != want.name || sp.ExpireAfterSeconds != nil && *sp.ExpireAfterSeconds == want.seconds() {
			continue
		}
		cmd := bson.D{{Key: "collMod", Value: coll}, {Key: "index", Value: bson.D{
			{Key: "name", Value: want.name}, {Key: "expireAfterSeconds", Value: want.seconds()},
		}}}
		if err := s.db.RunCommand(ctx, cmd).Err(); err != nil {
			if isUnauthorized(err) {
				// collMod is not in the built-in readWrite role (usual on
				// Atlas): the stored retention stays, and starting matters
				// more than changing it.
				s.opts.Logger.Warn().Err(err).Str("index", coll+"."+want.name).
					Int32("storedSeconds", storedSeconds(sp)).Int32("configuredSeconds", want.seconds()).
					Msg("the user may not run collMod: the stored retention stays; grant collMod or change it by hand (see docs/operating.md)")
				continue
			}
			return fmt.Errorf("set the retention of %s.%s: %w", coll, want.name, interpretError(err))
		}
	}
	return nil
}

// isMemberLease reports whether the lease name is a membership lease of the
// lease package ("<group>/member/<owner>"), the only leases that expire
// into deletion.
func isMemberLease(name string) bool {
	_, rest, ok := strings.Cut(name, "/")
	return ok && strings.HasPrefix(rest, "member/")
}

// bsonDate is t as a BSON date (milliseconds).
func bsonDate(t time.Time) bson.DateTime { return bson.NewDateTimeFromTime(t) }

// isUnauthorized reports MongoDB's Unauthorized (code 13): the user's
// roles do not grant the action.
func isUnauthorized(err error) bool {
	var se mongo.ServerError
	return errors.As(err, &se) && se.HasErrorCode(13)
}

// storedSeconds is the expireAfterSeconds of sp, -1 if it has none.
func storedSeconds(sp mongo.IndexSpecification) int32 {
	if sp.ExpireAfterSeconds == nil {
		return -1
	}
	return *sp.ExpireAfterSeconds
}
