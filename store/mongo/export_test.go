package mongo

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
)

// OpenMonitored is Open with a command monitor on the client.
func OpenMonitored(ctx context.Context, uri string, opts Options, mon *event.CommandMonitor) (*Store, error) {
	return open(ctx, uri, opts, mon)
}

// SetOrphanPage sets the page size of the orphan clean-up.
func (s *Store) SetOrphanPage(n int) { s.orphanPage = n }

// SetSerialise sets whether the store takes FerretDB's paths (see
// Store.serialise) on any server.
func (s *Store) SetSerialise(on bool) { s.serialise = on }

// ReadStamps is readStamps.
func (s *Store) ReadStamps(ctx context.Context, ids []string) (map[string]bson.ObjectID, error) {
	return s.readStamps(ctx, ids)
}
