package mongotest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/schedulerd/schedulerd/store/mongo/internal/doclock"
)

// FerretDB v1 runs a conditional write (update, delete, findAndModify) as a
// find and then a write by _id, so two clients' compare-and-sets on one
// document can both succeed; MongoDB applies filter and update atomically
// per document, and the scheduler's fences and token counts rely on that.
// The store driver locks the documents of its writes within one process
// (with the same doclock); several processes on one FerretDB (the chaos
// tests' three instances) need the server to do it. writeSerializer is a
// wire-protocol proxy in front of FerretDB that makes conflicting writes
// wait for each other, from when it forwards a write command until the
// reply to it comes back: writes whose statements all name documents by _id
// lock those documents (and share their collection); other writes lock the
// whole collection. Inserts (atomic by the unique _id index) and reads pass
// freely.
//
// It understands only as much of the protocol as it must: messages are
// length-prefixed with a 16-byte header (length, requestID, responseTo,
// opCode); the command is the body document of an OP_MSG, with its
// statements either in the body or in document-sequence sections. Anything
// else (the legacy OP_QUERY handshake) passes as a read.
type writeSerializer struct {
	backend string // FerretDB's own address

	mu    sync.Mutex
	conns map[net.Conn]struct{}

	locks  doclock.Set
	stats  *cmdStats // nil: not collected
	faults *Faults   // nil: none
}

const (
	opMsg         = 2013
	maxMessage    = 48 << 20 // MongoDB's maxMessageSizeBytes
	flagMoreToCom = 1 << 1   // OP_MSG moreToCome: no reply to this message
)

// serve accepts clients on ln until it is closed.
func (s *writeSerializer) serve(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go s.proxy(c)
	}
}

// closeAll closes every proxied connection (the server is stopping).
func (s *writeSerializer) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		_ = c.Close()
	}
}

func (s *writeSerializer) track(c net.Conn, add bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conns == nil {
		s.conns = map[net.Conn]struct{}{}
	}
	if add {
		s.conns[c] = struct{}{}
	} else {
		delete(s.conns, c)
	}
}

// proxy relays one client connection. Requests and replies travel in their
// own goroutines; a write request takes its locks before it is forwarded and
// the reply whose responseTo names it gives them back.
func (s *writeSerializer) proxy(client net.Conn) {
	server, err := net.Dial("tcp", s.backend)
	if err != nil {
		_ = client.Close()
		return
	}
	s.track(client, true)
	s.track(server, true)
	// pending is the requestID of the write holding held, 0 if none.
	var pmu sync.Mutex
	var pending int32
	var held *doclock.Held
	// dropReply is the requestID of a write whose reply Faults drops, 0 if none.
	var dropReply int32
	// inflight: the commands awaiting replies, for stats.
	type sent struct {
		shape    string
		at       time.Time
		lockWait time.Duration
	}
	inflight := map[int32]sent{}
	release := func(responseTo int32) {
		pmu.Lock()
		defer pmu.Unlock()
		if s.stats != nil {
			if r, ok := inflight[responseTo]; ok {
				delete(inflight, responseTo)
				s.stats.add(r.shape, time.Since(r.at), r.lockWait)
			}
		}
		if pending != 0 && (responseTo == pending || responseTo == 0) {
			s.locks.Unlock(held)
			pending, held = 0, nil
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			msg, err := readMessage(server)
			if err != nil {
				break
			}
			// The write is done in FerretDB once its reply is read.
			responseTo := int32(binary.LittleEndian.Uint32(msg[8:12]))
			release(responseTo)
			pmu.Lock()
			drop := dropReply != 0 && responseTo == dropReply
			pmu.Unlock()
			if drop {
				break
			}
			if _, werr := client.Write(msg); werr != nil {
				break
			}
		}
		_ = client.Close()
	}()
	for {
		msg, err := readMessage(client)
		if err != nil {
			break
		}
		requestID := int32(binary.LittleEndian.Uint32(msg[4:8]))
		began := time.Now()
		note := func() {
			if s.stats != nil {
				pmu.Lock()
				inflight[requestID] = sent{shape: shape(msg), at: began, lockWait: time.Since(began)}
				pmu.Unlock()
			}
		}
		s.faults.wait(msg)
		fault := s.faults.next(msg)
		if fault == FailWrite {
			break
		}
		if fault == DropReply {
			pmu.Lock()
			dropReply = requestID
			pmu.Unlock()
		}
		w, ok := classify(msg)
		switch {
		case !ok:
			note()
			_, err = server.Write(msg)
		case w.noReply:
			// No reply will come: hold the locks only while it is sent.
			l := s.locks.Lock(w.coll, w.ids...)
			_, err = server.Write(msg)
			s.locks.Unlock(l)
		default:
			l := s.locks.Lock(w.coll, w.ids...)
			note()
			pmu.Lock()
			pending, held = requestID, l
			pmu.Unlock()
			_, err = server.Write(msg)
		}
		if err != nil {
			break
		}
	}
	_ = server.Close()
	<-done
	release(0) // a write whose reply never came
	s.track(client, false)
	s.track(server, false)
}

// readMessage reads one whole wire-protocol message.
func readMessage(r io.Reader) ([]byte, error) {
	var head [4]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return nil, err
	}
	n := int(int32(binary.LittleEndian.Uint32(head[:])))
	if n < 16 || n > maxMessage {
		return nil, fmt.Errorf("message length %d out of range", n)
	}
	msg := make([]byte, n)
	copy(msg, head[:])
	if _, err := io.ReadFull(r, msg[4:]); err != nil {
		return nil, err
	}
	return msg, nil
}

// write is a write command that needs locks.
type write struct {
	coll    string
	ids     []string // the documents it touches; nil: not known
	noReply bool
}

// statements names, per write command, where its statements are and which
// field of a statement holds its filter; findAndModify has one, in the body.
var statements = map[string][2]string{
	"update": {"updates", "q"},
	"delete": {"deletes", "q"},
}

// classify returns the write to lock for msg; false for anything that needs
// none (reads, inserts, other opcodes).
func classify(msg []byte) (write, bool) {
	if int32(binary.LittleEndian.Uint32(msg[12:16])) != opMsg || len(msg) < 21 {
		return write{}, false
	}
	flags := binary.LittleEndian.Uint32(msg[16:20])
	body, seqs, err := sections(msg[20:])
	if err != nil {
		return write{}, false
	}
	elems, err := body.Elements()
	if err != nil || len(elems) == 0 {
		return write{}, false
	}
	name := elems[0].Key()
	coll, _ := elems[0].Value().StringValueOK()
	w := write{coll: coll, noReply: flags&flagMoreToCom != 0}
	var filters []bson.Raw
	switch name {
	case "findAndModify":
		if q, ok := body.Lookup("query").DocumentOK(); ok {
			filters = append(filters, q)
		} else {
			return w, true
		}
	case "update", "delete":
		for _, d := range statementDocs(name, body, seqs) {
			q, ok := d.Lookup(statements[name][1]).DocumentOK()
			if !ok {
				return w, true
			}
			filters = append(filters, q)
		}
	default:
		return write{}, false
	}
	for _, q := range filters {
		id, err := q.LookupErr("_id")
		if err != nil || id.Type == bson.TypeEmbeddedDocument {
			return w, true // no _id, or an operator ($in...): whole collection
		}
		w.ids = append(w.ids, id.String())
	}
	if len(w.ids) == 0 {
		w.ids = nil
	}
	return w, true
}

// statementDocs returns the statements of an update or delete command,
// whether they came in the body or in a document sequence.
func statementDocs(name string, body bson.Raw, seqs map[string][]bson.Raw) []bson.Raw {
	where := statements[name][0]
	docs := seqs[where]
	if arr, ok := body.Lookup(where).ArrayOK(); ok {
		vals, _ := arr.Values()
		for _, v := range vals {
			if d, ok := v.DocumentOK(); ok {
				docs = append(docs, d)
			}
		}
	}
	return docs
}

// sections splits an OP_MSG's sections into the body document (kind 0) and
// the document sequences (kind 1) by identifier.
func sections(b []byte) (body bson.Raw, seqs map[string][]bson.Raw, err error) {
	seqs = map[string][]bson.Raw{}
	for len(b) > 0 {
		kind := b[0]
		b = b[1:]
		if len(b) < 4 {
			return nil, nil, errors.New("short section")
		}
		size := int(int32(binary.LittleEndian.Uint32(b[:4])))
		if size < 5 || size > len(b) {
			return nil, nil, errors.New("bad section size")
		}
		sec := b[:size]
		b = b[size:]
		switch kind {
		case 0:
			body = bson.Raw(sec)
		case 1:
			rest := sec[4:]
			i := slices.Index(rest, 0)
			if i < 0 {
				return nil, nil, errors.New("unterminated sequence name")
			}
			id := string(rest[:i])
			rest = rest[i+1:]
			for len(rest) >= 4 {
				n := int(int32(binary.LittleEndian.Uint32(rest[:4])))
				if n < 5 || n > len(rest) {
					return nil, nil, errors.New("bad document in sequence")
				}
				seqs[id] = append(seqs[id], bson.Raw(rest[:n]))
				rest = rest[n:]
			}
		default:
			return nil, nil, fmt.Errorf("unknown section kind %d", kind)
		}
	}
	if body == nil {
		return nil, nil, errors.New("no body section")
	}
	return body, seqs, nil
}
