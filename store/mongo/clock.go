package mongo

import (
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// Expiries (of leases, of delivery tokens) are instants compared with
// "now". Where the server can (serverCaps.serverClock) the comparison is
// made on the server's clock: the caller's instant is moved onto it by its
// distance from this process's clock, so that a lease taken or a token
// judged by an instance whose clock runs ahead or behind means the same to
// every instance. Elsewhere (FerretDB v1, which has neither $expr nor
// pipeline updates) the caller's instant is compared as it is.
//
// The callers' instants are of the process's clock (Options.Clock); tests
// that pass instants of another (a fixed date, a fake clock they advance)
// and compare them exactly set Options.ClientClock.

// nowNanos is the server's clock ($$NOW, milliseconds) in Unix nanoseconds.
var nowNanos = bson.D{{Key: "$multiply", Value: bson.A{bson.D{{Key: "$toLong", Value: "$$NOW"}}, int64(time.Millisecond)}}}

// maxClockOffset bounds the distances moved onto the server's clock:
// farther instants ("every token", an end of time) mean the same on any
// clock, and an $add that overflowed int64 would not.
const maxClockOffset = 100 * 365 * 24 * time.Hour

// instant is t as a value of an aggregation expression or a pipeline
// update: on the server's clock if the server judges expiries, else t's
// Unix nanoseconds.
func (s *Store) instant(t time.Time) any {
	off, ok := s.clockOffset(t)
	if !ok {
		return unixNano(t)
	}
	return bson.D{{Key: "$add", Value: bson.A{nowNanos, int64(off)}}}
}

// instantDate is instant as a BSON date (milliseconds).
func (s *Store) instantDate(t time.Time) any {
	off, ok := s.clockOffset(t)
	if !ok {
		return bsonDate(t)
	}
	return bson.D{{Key: "$add", Value: bson.A{"$$NOW", off.Milliseconds()}}}
}

// clockOffset is t's distance from this process's clock, and whether it is
// to be moved onto the server's clock.
func (s *Store) clockOffset(t time.Time) (time.Duration, bool) {
	if !s.caps.serverClock {
		return 0, false
	}
	off := t.Sub(s.opts.Clock.Now())
	if off > maxClockOffset || off < -maxClockOffset {
		return 0, false
	}
	return off, true
}

// before is the filter "field < t" (or <= when orEqual) on the clock that
// judges expiries. On the server's clock it is an $expr, which also
// matches a missing field: callers that may meet one add an $exists.
func (s *Store) before(field string, t time.Time, orEqual bool) bson.E {
	op := "$lt"
	if orEqual {
		op = "$lte"
	}
	if v := s.instant(t); s.caps.serverClock {
		if _, isExpr := v.(bson.D); isExpr {
			return bson.E{Key: "$expr", Value: bson.D{{Key: op, Value: bson.A{"$" + field, v}}}}
		}
	}
	return bson.E{Key: field, Value: bson.D{{Key: op, Value: unixNano(t)}}}
}

// onServerClock is the update {$set: set, $unset: unset} with set's field
// moved onto the server's clock (instant): a pipeline update, the only
// kind that reads $$NOW (MongoDB 4.2). Its other values are $literal, so
// that a string starting with $ is not read as a field path.
func (s *Store) onServerClock(set, unset bson.D, field string, t time.Time) mongo.Pipeline {
	ps := make(bson.D, 0, len(set))
	for _, e := range set {
		v := any(bson.D{{Key: "$literal", Value: e.Value}})
		if e.Key == field {
			v = s.instant(t)
		}
		ps = append(ps, bson.E{Key: e.Key, Value: v})
	}
	p := mongo.Pipeline{{{Key: "$set", Value: ps}}}
	if len(unset) > 0 {
		names := make(bson.A, len(unset))
		for i, e := range unset {
			names[i] = e.Key
		}
		p = append(p, bson.D{{Key: "$unset", Value: names}})
	}
	return p
}
