package mongotest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
)

// FerretDB v1 runs a conditional write (update, delete, findAndModify) as a
// find and then a write by _id, so two clients' compare-and-sets on one
// document can both succeed; MongoDB applies filter and update atomically
// per document, and the scheduler's fences and token counts rely on that.
// The store driver serialises its writes within one process; several
// processes on one FerretDB (the chaos tests' three instances) need the
// server to do it. writeSerializer is a wire-protocol proxy in front of
// FerretDB that lets one write command at a time through to it, from when it
// forwards the command until the reply to it comes back. Reads pass freely.
//
// It understands only as much of the protocol as it must: messages are
// length-prefixed with a 16-byte header (length, requestID, responseTo,
// opCode); the command name is the first key of the body document of an
// OP_MSG. Anything else (the legacy OP_QUERY handshake) passes as a read.
type writeSerializer struct {
	backend string // FerretDB's own address

	write sync.Mutex // held by one write command, request to reply

	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

// writeCommands are the commands that change documents.
var writeCommands = map[string]bool{
	"insert": true, "update": true, "delete": true, "findAndModify": true,
}

const (
	opMsg        = 2013
	maxMessage   = 48 << 20 // MongoDB's maxMessageSizeBytes
	flagMoreToCo = 1 << 1   // OP_MSG moreToCome: no reply to this message
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
// own goroutines; a write request takes the lock before it is forwarded and
// the reply whose responseTo names it gives the lock back.
func (s *writeSerializer) proxy(client net.Conn) {
	server, err := net.Dial("tcp", s.backend)
	if err != nil {
		_ = client.Close()
		return
	}
	s.track(client, true)
	s.track(server, true)
	// pending is the requestID of the write holding the lock, 0 if none.
	var pmu sync.Mutex
	var pending int32
	unlock := func(responseTo int32) {
		pmu.Lock()
		defer pmu.Unlock()
		if pending != 0 && (responseTo == pending || responseTo == 0) {
			pending = 0
			s.write.Unlock()
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
			unlock(int32(binary.LittleEndian.Uint32(msg[8:12])))
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
		isWrite, noReply := classify(msg)
		if isWrite {
			s.write.Lock()
			if noReply {
				// No reply will come: hold the lock only while it is sent.
				_, err = server.Write(msg)
				s.write.Unlock()
			} else {
				pmu.Lock()
				pending = requestID
				pmu.Unlock()
				_, err = server.Write(msg)
			}
		} else {
			_, err = server.Write(msg)
		}
		if err != nil {
			break
		}
	}
	_ = server.Close()
	<-done
	unlock(0) // a write whose reply never came
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

// classify tells whether msg is a write command, and whether its sender
// expects no reply (moreToCome).
func classify(msg []byte) (write, noReply bool) {
	if int32(binary.LittleEndian.Uint32(msg[12:16])) != opMsg || len(msg) < 21 {
		return false, false
	}
	flags := binary.LittleEndian.Uint32(msg[16:20])
	name, err := commandName(msg[20:])
	if err != nil {
		return false, false
	}
	return writeCommands[name], flags&flagMoreToCo != 0
}

// commandName finds the body section (kind 0) of an OP_MSG's sections and
// returns its first key.
func commandName(sections []byte) (string, error) {
	for len(sections) > 0 {
		kind := sections[0]
		sections = sections[1:]
		if len(sections) < 4 {
			return "", errors.New("short section")
		}
		size := int(int32(binary.LittleEndian.Uint32(sections[:4])))
		if size < 5 || size > len(sections) {
			return "", errors.New("bad section size")
		}
		if kind == 0 {
			doc := sections[:size]
			// int32 length, then the first element: type byte, cstring key.
			for i := 5; i < len(doc); i++ {
				if doc[i] == 0 {
					return string(doc[5:i]), nil
				}
			}
			return "", errors.New("unterminated key")
		}
		sections = sections[size:]
	}
	return "", errors.New("no body section")
}
