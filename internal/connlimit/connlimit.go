// Package connlimit caps an HTTP server's connections, in total and per
// client address, without ever blocking Accept: a connection over a cap
// closes the oldest idle one (idle between requests, or accepted and not
// yet sent a request), and is refused only when every connection it
// competes with is busy with a request. A flood of idle connections thus
// makes room for a health check or a release instead of starving it, as a
// listener that stops accepting at the cap (netutil.LimitListener) would.
package connlimit

import (
	"container/list"
	"net"
	"net/http"
	"sync"
)

// Shed reasons passed to Limiter.OnShed.
const (
	// ShedIdle: an idle connection was closed to make room.
	ShedIdle = "idle_closed"
	// ShedRefused: a new connection was closed at once, every connection
	// it competed with being busy.
	ShedRefused = "refused"
)

// Limiter tracks the connections of one http.Server. Wrap the server's
// listener with Listener and set the server's ConnState to ConnState.
type Limiter struct {
	max, perAddr int
	onShed       func(reason string)

	mu    sync.Mutex
	conns map[net.Conn]*conn
	addrs map[string]*addr
	idle  list.List // of *conn, oldest first
}

type conn struct {
	c        net.Conn
	addr     *addr
	idle     *list.Element // in Limiter.idle; nil while busy
	addrIdle *list.Element // in addr.idle
}

type addr struct {
	key   string
	count int
	idle  list.List // of *conn, oldest first
}

// New returns a Limiter allowing max connections in all and perAddr from
// one client IP address (0: no cap). onShed, if not nil, is called (under
// no lock) for every connection closed by the Limiter.
func New(max, perAddr int, onShed func(reason string)) *Limiter {
	return &Limiter{max: max, perAddr: perAddr, onShed: onShed, conns: map[net.Conn]*conn{}, addrs: map[string]*addr{}}
}

// Listener wraps ln: each accepted connection is admitted or refused (and
// the next one accepted) before Accept returns.
func (l *Limiter) Listener(ln net.Listener) net.Listener { return listener{ln, l} }

type listener struct {
	net.Listener
	l *Limiter
}

func (ln listener) Accept() (net.Conn, error) {
	for {
		c, err := ln.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if ln.l.admit(c) {
			return c, nil
		}
	}
}

// Open returns the number of connections being tracked.
func (l *Limiter) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}

func addrKey(c net.Conn) string {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return a.IP.String()
	}
	return c.RemoteAddr().String()
}

// admit registers c as idle (it has sent no request yet), first closing
// the oldest idle connection of its address and then the oldest of all
// where c would exceed a cap. It closes c and returns false if no idle
// connection can make room.
func (l *Limiter) admit(c net.Conn) bool {
	var shed []net.Conn
	ok := func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		a := l.addrs[addrKey(c)]
		if a == nil {
			a = &addr{key: addrKey(c)}
		}
		if l.perAddr > 0 && a.count >= l.perAddr {
			if a.idle.Len() == 0 {
				return false
			}
			shed = append(shed, l.drop(a.idle.Front().Value.(*conn)))
		}
		if l.max > 0 && len(l.conns) >= l.max {
			if l.idle.Len() == 0 {
				return false
			}
			shed = append(shed, l.drop(l.idle.Front().Value.(*conn)))
		}
		l.addrs[a.key] = a
		a.count++
		e := &conn{c: c, addr: a}
		l.conns[c] = e
		l.setIdle(e)
		return true
	}()
	for _, s := range shed {
		l.shed(ShedIdle)
		s.Close()
	}
	if !ok {
		l.shed(ShedRefused)
		c.Close()
	}
	return ok
}

func (l *Limiter) shed(reason string) {
	if l.onShed != nil {
		l.onShed(reason)
	}
}

// drop forgets e (under l.mu) and returns its connection for closing; the
// server's later StateClosed for it is ignored.
func (l *Limiter) drop(e *conn) net.Conn {
	l.setBusy(e)
	delete(l.conns, e.c)
	e.addr.count--
	if e.addr.count == 0 {
		delete(l.addrs, e.addr.key)
	}
	return e.c
}

func (l *Limiter) setIdle(e *conn) {
	if e.idle == nil {
		e.idle = l.idle.PushBack(e)
		e.addrIdle = e.addr.idle.PushBack(e)
	}
}

func (l *Limiter) setBusy(e *conn) {
	if e.idle != nil {
		l.idle.Remove(e.idle)
		e.addr.idle.Remove(e.addrIdle)
		e.idle, e.addrIdle = nil, nil
	}
}

// ConnState is the http.Server's ConnState hook.
func (l *Limiter) ConnState(c net.Conn, s http.ConnState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.conns[c]
	if e == nil {
		return // shed, or not accepted through Listener
	}
	switch s {
	case http.StateIdle:
		l.setIdle(e)
	case http.StateActive:
		l.setBusy(e)
	case http.StateClosed, http.StateHijacked:
		l.drop(e)
	}
}
