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
// tests of what a client makes of a write cut in the middle of a call, and
// holds commands by name (Hold), for tests of what a client does while a
// slow command (an index build) is in progress. The zero value cuts and
// holds nothing; it is safe for concurrent use.
type Faults struct {
	mu   sync.Mutex
	k    int // writes still to pass before the cut one; 0: disarmed
	mode FaultMode
	hit  bool
	// holds are the held command names, each with the channel that is
	// closed to let them through and the one closed when the first arrives.
	holds map[string]*hold
}

type hold struct {
	release, arrived chan struct{}
	arrivedOnce      sync.Once
}

// Hold makes the proxy keep every command named cmd (for example
// "createIndexes") from the server until release is called; arrived is
// closed when the first such command reaches the proxy. The other commands
// of the held connection wait behind it, as behind a slow command on the
// server; those of other connections pass.
func (f *Faults) Hold(cmd string) (arrived <-chan struct{}, release func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.holds == nil {
		f.holds = map[string]*hold{}
	}
	h := &hold{release: make(chan struct{}), arrived: make(chan struct{})}
	f.holds[cmd] = h
	var once sync.Once
	return h.arrived, func() {
		once.Do(func() {
			f.mu.Lock()
			if f.holds[cmd] == h {
				delete(f.holds, cmd)
			}
			f.mu.Unlock()
			close(h.release)
		})
	}
}

// wait blocks while msg is a command that Hold holds.
func (f *Faults) wait(msg []byte) {
	if f == nil {
		return
	}
	f.mu.Lock()
	h := f.holds[commandName(msg)]
	f.mu.Unlock()
	if h == nil {
		return
	}
	h.arrivedOnce.Do(func() { close(h.arrived) })
	<-h.release
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
func isWrite(msg []byte) bool { return writeCommands[commandName(msg)] }

// commandName is the command of an OP_MSG, "" for anything else.
func commandName(msg []byte) string {
	if len(msg) < 21 || int32(binary.LittleEndian.Uint32(msg[12:16])) != opMsg {
		return ""
	}
	body, _, err := sections(msg[20:])
	if err != nil {
		return ""
	}
	elems, err := body.Elements()
	if err != nil || len(elems) == 0 {
		return ""
	}
	return elems[0].Key()
}
