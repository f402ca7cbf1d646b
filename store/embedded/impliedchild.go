package embedded

import (
	"github.com/schedulerd/schedulerd/model"
)

// A one-off created with its fire in its row (impliesFire) needs no
// children entry for its sole child: the emitter reads
// children only to make fires, and the one fire that child gives is the
// one the row holds, written in the same transaction. The row is marked
// (schedChildImplied) and keeps the mark while it holds that child, when
// the fire or the event leaves it too: the fire lives on as a row of its
// own.

// impliesChild reports whether sole, the sole child (soleChild) of the
// one-off sc, can go without a children entry when the row of sc holds the
// fire f (impliesFire): f is the fire the emitter would make of it, at
// runAt's fire instant.
func impliesChild(sc *model.Schedule, sole *model.Child, f *model.Fire) bool {
	return sole != nil && sc.RunAt != nil && f.FireTime.Equal(model.FireInstant(*sc.RunAt))
}

// rowChildImplied reports whether the sole child that the schedule row raw
// holds has no children entry (schedChildImplied).
func rowChildImplied(raw []byte) bool { return rowFlags(raw)&schedChildImplied != 0 }

// markChildImplied marks doc, a new encoding of a schedule row that holds
// the same child as before, if implied (the old row's rowChildImplied),
// and returns it.
func markChildImplied(doc []byte, implied bool) []byte {
	if implied && rowFlags(doc)&schedSoleChild != 0 {
		doc[1] |= schedChildImplied // the low seven flags are in the first byte of the flags' uvarint
	}
	return doc
}
