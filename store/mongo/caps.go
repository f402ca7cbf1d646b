package mongo

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// serverCaps is what the server supports beyond the subset the package
// doc describes. decideCaps is the one place that chooses a code path by
// server; the methods consult the result. Features are probed at Open
// (probe), not read from the version string: a MongoDB 6 or 7 at an older
// featureCompatibilityVersion refuses what its version has, and services
// that speak the protocol report versions whose features they lack.
type serverCaps struct {
	// ferret: the server is FerretDB v1 (see Store.locks).
	ferret bool
	// partialIndexes: partial indexes with $in in their filter (MongoDB
	// 6.0 at featureCompatibilityVersion 6.0).
	partialIndexes bool
	// ttl: TTL indexes, which FerretDB v1 refuses ("expireAfterSeconds is
	// not implemented"): the purge jobs are then the only retention.
	ttl bool
	// serverClock: expiries are judged by the server's clock ($$NOW in an
	// $expr or a pipeline update), so that instances whose clocks disagree
	// still agree on when a lease or a token expired. FerretDB v1 has
	// neither, and judges by the callers' instants.
	serverClock bool
	// transactions: multi-document transactions, on a replica set (a
	// standalone server refuses them; through mongos, whose hello names no
	// set, the writes go without them).
	transactions bool
}

// minVersion is the oldest MongoDB accepted: the Go driver v2 refuses
// older servers (wire version 9), and transactions, $$NOW and pipeline
// updates are all there from 4.4 on.
const minVersion = "4.4"

// ErrServerTooOld is Open's refusal of a server older than MongoDB 4.4.
var ErrServerTooOld = errors.New("the server is older than MongoDB " + minVersion + ", the oldest supported")

// checkVersion refuses a version string below minVersion. An unparsable
// one passes: the probes decide what it can do.
func checkVersion(version string) error {
	parts := strings.SplitN(version, ".", 3)
	major, err := strconv.Atoi(parts[0])
	if err != nil {
		return nil
	}
	minor := 0
	if len(parts) > 1 {
		minor, _ = strconv.Atoi(parts[1])
	}
	if major < 4 || major == 4 && minor < 4 {
		return fmt.Errorf("%w: it reports %s; upgrade it to %s or later", ErrServerTooOld, version, minVersion)
	}
	return nil
}

// isWireVersionTooOld reports the driver's refusal of a server older than
// it supports, which comes before any command ("reports wire version N,
// but this version of the Go driver requires at least M"); the driver
// gives it no type of its own.
func isWireVersionTooOld(err error) bool {
	return strings.Contains(err.Error(), "reports wire version") && strings.Contains(err.Error(), "requires at least")
}

// probes are the features probe found.
type probes struct {
	partialIn bool // a partial index whose filter has $in
	now       bool // $$NOW in a pipeline update
}

// probe tries the features that differ between servers on a scratch
// collection of its own, dropped afterwards: the claim's partial index
// (an empty collection's index is created at once) and one pipeline update
// that reads $$NOW. A refusal of either means the feature is missing; a
// failure to reach the server fails Open.
func (s *Store) probe(ctx context.Context) (probes, error) {
	var p probes
	c := s.db.Collection("probe_" + bson.NewObjectID().Hex())
	defer func() { _ = c.Drop(context.WithoutCancel(ctx)) }()
	_, err := c.Indexes().CreateOne(ctx, claimIndex(true))
	switch {
	case err == nil:
		p.partialIn = true
	case isUnavailable(err):
		return p, fmt.Errorf("probe partial indexes: %w", interpretError(err))
	case !isCode(err, 67): // CannotCreateIndex: "Expression not supported in partial index"
		return p, fmt.Errorf("probe partial indexes: %w", err)
	}
	_, err = c.UpdateOne(ctx, bson.D{{Key: "_id", Value: "now"}},
		mongo.Pipeline{{{Key: "$set", Value: bson.D{{Key: "at", Value: "$$NOW"}}}}}, options.UpdateOne().SetUpsert(true))
	switch {
	case err == nil:
		p.now = true
	case isUnavailable(err):
		return p, fmt.Errorf("probe $$NOW: %w", interpretError(err))
	}
	return p, nil
}

// isCode reports whether err is a server error with code.
func isCode(err error, code int) bool {
	var se mongo.ServerError
	return errors.As(err, &se) && se.HasErrorCode(code)
}

func decideCaps(ferret bool, setName string, clientClock bool, p probes) serverCaps {
	if ferret {
		return serverCaps{ferret: true}
	}
	return serverCaps{
		partialIndexes: p.partialIn,
		ttl:            true,
		serverClock:    !clientClock && p.now,
		transactions:   setName != "",
	}
}
