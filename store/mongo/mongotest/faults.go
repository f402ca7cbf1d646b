package mongotest

import (
	"encoding/binary"
	"sync"
)

// FaultMode says how Faults cuts a write command.
type FaultMode int

const (
	// FailWrite closes the client's connection instead of forwarding the
	// write: it never reaches FerretDB, but the client cannot know that.
	FailWrite FaultMode = iota + 1
	// DropReply forwards the write and closes the client's connection in
	// place of its reply: the write applied and its reply was lost.
	DropReply
)

// Faults cuts one write command (insert, update, delete, findAndModify)
// passing through the proxy of a server started with SerializeWrites, for
// tests of what a client makes of a write cut in the middle of a call. The
// zero value cuts nothing; it is safe for concurrent use.
type Faults struct {
	mu   sync.Mutex
	k    int // writes still to pass before the cut one; 0: disarmed
	mode FaultMode
	hit  bool
}

// Arm makes the k-th write command (1 for the next one) that the proxy
// forwards from now on fail as mode says. Arm replaces an earlier arming.
func (f *Faults) Arm(k int, mode FaultMode) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.k, f.mode, f.hit = k, mode, false
}

// Disarm cancels a pending cut and reports whether the armed one happened.
func (f *Faults) Disarm() (hit bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.k = 0
	return f.hit
}

// next counts a write command and returns how to cut it (0: not at all).
func (f *Faults) next(msg []byte) FaultMode {
	if f == nil || !isWrite(msg) {
		return 0
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.k == 0 {
		return 0
	}
	f.k--
	if f.k > 0 {
		return 0
	}
	f.hit = true
	return f.mode
}

// writeCommands are the commands Faults counts.
var writeCommands = map[string]bool{"insert": true, "update": true, "delete": true, "findAndModify": true}

// isWrite reports whether msg is an OP_MSG whose command is a write.
func isWrite(msg []byte) bool {
	if len(msg) < 21 || int32(binary.LittleEndian.Uint32(msg[12:16])) != opMsg {
		return false
	}
	body, _, err := sections(msg[20:])
	if err != nil {
		return false
	}
	elems, err := body.Elements()
	if err != nil || len(elems) == 0 {
		return false
	}
	return writeCommands[elems[0].Key()]
}
