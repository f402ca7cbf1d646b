package chaos

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// watchdog restarts FerretDB when it stops answering, the way an operator's
// liveness probe would. FerretDB v1 holds a backend connection for each
// statement of a command until the command ends, so commands in flight at
// once can take its whole pool and wait for each other for good (seen in
// goroutine dumps: one 250-statement claim holding all 50 PostgreSQL
// connections; later three claims holding 23, 16 and 11). The store driver
// sends claims to FerretDB in small commands and the instances' client
// pools are kept small (startFerret), which ended the wedges in the runs
// since; the watchdog stays as a guard. A restart is one more store outage,
// which the service must survive anyway; the test logs and counts it.
//
// It probes with a findOne on the leases collection every 2s; 3 failed
// probes in a row restart the process on the same port and data. db must
// be the database the instances use. It returns the restart counter, and
// tells onRestart each outage it ended: from the last probe that was
// answered to the restart.
func (f *ferret) watchdog(ctx context.Context, t *testing.T, db string, onRestart func(start, end time.Time)) *atomic.Int32 {
	var restarts atomic.Int32
	client, err := mongo.Connect(options.Client().ApplyURI(f.uri).
		SetServerSelectionTimeout(3 * time.Second).SetConnectTimeout(3 * time.Second))
	if err != nil {
		t.Fatalf("watchdog: %v", err)
	}
	go func() {
		defer func() { _ = client.Disconnect(context.Background()) }()
		coll := client.Database(db).Collection("leases")
		fails := 0
		lastOK := time.Now()
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(2 * time.Second):
			}
			if !f.running() {
				fails = 0
				continue
			}
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err := coll.FindOne(pctx, bson.D{}).Err()
			cancel()
			if err == nil || errors.Is(err, mongo.ErrNoDocuments) {
				fails = 0
				lastOK = time.Now()
				continue
			}
			if ctx.Err() != nil {
				return
			}
			fails++
			if fails < 3 {
				continue
			}
			fails = 0
			restarts.Add(1)
			t.Logf("watchdog: FerretDB has not answered a query for 3 probes (%v); restarting it", err)
			f.kill()
			if _, err := f.tryStart(); err != nil {
				t.Errorf("watchdog: restart FerretDB: %v", err)
				return
			}
			onRestart(lastOK, time.Now())
		}
	}()
	return &restarts
}
