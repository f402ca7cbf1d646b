package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/schedulerd/schedulerd/store/mongo"
)

// indexStatus is the MongoDB store's report of its background index build.
type indexStatus interface {
	IndexStatus() (building []string, err error)
}

// indexCheck is /readyz's "indexes" check: what the store is still
// building; none (false) where ix is nil. It never makes the instance
// unready: the queries run on the indexes of the previous version
// meanwhile, and an instance that waited for a build (hours on a large
// collection) would stall a rolling upgrade.
func indexCheck(ix indexStatus) (string, bool) {
	if ix == nil {
		return "", false
	}
	building, err := ix.IndexStatus()
	switch {
	case len(building) == 0:
		return "ok", true
	case err != nil:
		return "building " + strings.Join(building, ", ") + " (last attempt failed: " + err.Error() + ")", true
	}
	return "building " + strings.Join(building, ", "), true
}

// BuildMongoIndexes builds the MongoDB store's missing indexes in the
// foreground, waiting for each build, and drops the ones they supersede:
// the schedulerd mongo-indexes command, which an operator runs with the
// instances' configuration before rolling out a version that adds indexes.
// It writes a line per index to out.
func BuildMongoIndexes(ctx context.Context, cfg Config, out io.Writer) error {
	if cfg.Store != "mongo" {
		return errors.New("store: mongo-indexes needs store=mongo")
	}
	o := mongoOptions(cfg)
	o.SkipIndexes = true
	octx, cancel := context.WithTimeout(ctx, 60*time.Second)
	st, err := mongo.Open(octx, cfg.MongoURI, o)
	cancel()
	if err != nil {
		return fmt.Errorf("open mongo store: %w", err)
	}
	defer st.Close()
	n := 0
	err = st.BuildIndexes(ctx, func(index string) {
		n++
		fmt.Fprintf(out, "building index %s\n", index)
	})
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "indexes up to date (%d built)\n", n)
	return err
}
