package mongo

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

// A create that writes one-offs' fires and events with their schedules
// (ScheduleCreateMany) does so in one transaction
// on a replica set. MongoDB bounds a transaction: the server aborts one
// that runs longer than transactionLifetimeLimitSeconds (60 s by
// default), its writes stay in the WiredTiger cache until the commit (a
// large one fails with TransactionTooLargeForCache), and the driver's
// WithTransaction retries the whole callback after a transient error until
// the client's timeout, so a create over those bounds fails every time
// (MongoDB manual, "Production Considerations" of transactions). Only a
// bounded part goes in the transaction: at most txnMaxDocs documents and
// txnMaxBytes of events. The other events of a fire are written after the
// commit, in index order; the fire is stored with Remaining counting them
// and lowered after each chunk, as the emitter's background emission does
// (emitter/background.go), so that a failure or a crash after the commit
// leaves a fire the emitter completes (FireListEmitting).

// Bounds of what one create writes in its transaction: a few hundred
// milliseconds of writes, far within the 60 s lifetime and the cache a
// transaction may hold, and within the 16 MB of one oplog entry (which
// held a whole transaction before MongoDB 4.2).
const (
	txnMaxDocs  = 1000
	txnMaxBytes = 8 << 20
)

// txnSplit is what a create writes in its transaction and after it.
type txnSplit struct {
	// in are the fires as the transaction writes them, with the events
	// that fit; a fire with events left out has Remaining set to their
	// number.
	in []store.FireNew
	// rest[i] are the events of in[i] written after the commit.
	rest [][]*model.Event
}

// splitForTxn keeps the events of fs in the transaction, in order, while
// the documents (fires and events) stay within docs and the events' BSON
// size within bytes: what the transaction's other documents leave of
// txnMaxDocs and txnMaxBytes. A fire whose events do not all fit keeps its
// first k (indexes 0..k-1) and is written with Remaining = Count-k; the
// fires after it keep none. A fire whose events are not exactly its
// indexes 0..Count-1 in order, or that is already being emitted in the
// background, keeps them all: Remaining could not describe the part left
// out (none is planned so).
func splitForTxn(fs []store.FireNew, docs, bytes int) txnSplit {
	sp := txnSplit{in: make([]store.FireNew, len(fs)), rest: make([][]*model.Event, len(fs))}
	docs -= len(fs)
	full := false
	for i, fn := range fs {
		sp.in[i] = fn
		if !splittable(fn) {
			docs -= len(fn.Events)
			continue
		}
		k := 0
		for ; !full && k < len(fn.Events); k++ {
			size := eventSize(fn.Events[k])
			if docs < 1 || size > bytes {
				full = true
				break
			}
			docs--
			bytes -= size
		}
		if k == len(fn.Events) {
			continue
		}
		f := *fn.Fire
		f.Remaining = f.Count - k
		sp.in[i] = store.FireNew{Fire: &f, Events: fn.Events[:k]}
		sp.rest[i] = fn.Events[k:]
	}
	return sp
}

// splittable reports whether fn's events are its indexes 0..Count-1 in
// order and it is not being emitted in the background.
func splittable(fn store.FireNew) bool {
	if fn.Fire == nil || fn.Fire.Remaining != 0 || len(fn.Events) != fn.Fire.Count {
		return false
	}
	for i, e := range fn.Events {
		if e.Index != i {
			return false
		}
	}
	return true
}

// eventSize is the BSON size of e's document; txnMaxBytes if it does not
// encode (it then goes after the commit, whose insert reports the error).
func eventSize(e *model.Event) int {
	b, err := bson.Marshal(toEventDoc(e))
	if err != nil {
		return txnMaxBytes
	}
	return len(b)
}

// writeRest writes, after the commit, the events splitForTxn left out of
// the fires the transaction inserted (inserted[i] for sp.in[i]), in chunks
// of txnMaxDocs, lowering each fire's Remaining after every chunk. It
// returns how many events it stored; events that exist already (a chunk
// written again, the emitter completing the fire at the same time) are
// left as they are.
func (s *Store) writeRest(ctx context.Context, sp txnSplit, inserted []bool) (int, error) {
	n := 0
	for i, evs := range sp.rest {
		if len(evs) == 0 || i >= len(inserted) || !inserted[i] {
			continue
		}
		id := sp.in[i].Fire.ID
		for lo := 0; lo < len(evs); lo += txnMaxDocs {
			hi := min(lo+txnMaxDocs, len(evs))
			m, err := s.EventInsertMany(ctx, evs[lo:hi])
			n += m
			if err != nil {
				return n, fmt.Errorf("fire %s: the events after the commit: %w", id, err)
			}
			if err := s.FireSetRemaining(ctx, id, len(evs)-hi); err != nil {
				return n, fmt.Errorf("fire %s: the events after the commit: %w", id, err)
			}
		}
	}
	return n, nil
}

// finishRest is writeRest for a create whose transaction committed: the
// create has succeeded whatever happens here (the schedules and fires are
// stored), so a failure is logged and left to the emitter, which completes
// a fire whose Remaining is above 0. It is not cut short by the caller
// going away.
func (s *Store) finishRest(ctx context.Context, sp txnSplit, inserted []bool) int {
	n, err := s.writeRest(context.WithoutCancel(ctx), sp, inserted)
	if err != nil {
		s.opts.Logger.Warn().Err(err).Int("written", n).
			Msg("writing the events a create left out of its transaction failed; the emitter completes them")
	}
	return n
}
