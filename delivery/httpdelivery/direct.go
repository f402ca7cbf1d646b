package httpdelivery

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"
)

// The direct path sends a request to a plain-http consumer on a kept-alive
// HTTP/1.1 connection of its own pool, writing the request and reading the
// answer in the delivering goroutine. net/http's Transport hands each
// request to a connection's write goroutine and its answer back from the
// read goroutine, and those hand-offs cost more CPU than the request itself
// when events go one or a few at a time (a fire spread over its window).
// The bytes on the wire are net/http's (TestDirectRequestBytes); https
// targets, and the connections a tenant's target rule must judge, stay on
// net/http.

// directTarget is what the direct path needs of a target URL, parsed once.
type directTarget struct {
	addr string // host:port dialled, the pool's key
	// head is the request up to the Content-Length value: the request
	// line, Host, User-Agent.
	head []byte
}

// newDirectTarget returns the direct form of an http URL, or nil when
// net/http must send it: a host net/http would rewrite (non-ASCII, an IPv6
// zone, characters a Host header cannot hold), user info (net/http sends
// it as Authorization), a request URI or user agent it would refuse or
// rewrite.
func newDirectTarget(scheme, host, hostname, port, requestURI string, hasUser bool, userAgent string) *directTarget {
	if scheme != "http" || hasUser || host == "" || !printable(host, false) || !printable(requestURI, false) ||
		!printable(userAgent, true) || bytes.IndexByte([]byte(host), '%') >= 0 {
		return nil
	}
	if userAgent == "" || userAgent[0] == ' ' || userAgent[len(userAgent)-1] == ' ' {
		return nil
	}
	if port == "" {
		port = "80"
	}
	host = trimEmptyPort(host)
	head := make([]byte, 0, 64+len(requestURI)+len(host)+len(userAgent))
	head = append(head, "POST "...)
	head = append(head, requestURI...)
	head = append(head, " HTTP/1.1\r\nHost: "...)
	head = append(head, host...)
	head = append(head, "\r\nUser-Agent: "...)
	head = append(head, userAgent...)
	head = append(head, "\r\nContent-Length: "...)
	return &directTarget{addr: net.JoinHostPort(hostname, port), head: head}
}

// printable reports whether s is printable ASCII (spaces only if allowed).
func printable(s string, spaces bool) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x21 || c > 0x7e {
			if c != ' ' || !spaces {
				return false
			}
		}
	}
	return true
}

// trimEmptyPort drops a trailing ":" as net/http does for the Host header.
func trimEmptyPort(host string) string {
	if len(host) > 0 && host[len(host)-1] == ':' {
		return host[:len(host)-1]
	}
	return host
}

// appendRequest appends the rest of the request after t.head: the length,
// the headers in net/http's order (sorted, then Accept-Encoding, which its
// Transport adds) and the body.
func appendRequest(b []byte, t *directTarget, id string, ts, sig, body []byte) []byte {
	b = append(b, t.head...)
	b = strconv.AppendInt(b, int64(len(body)), 10)
	b = append(b, "\r\nContent-Type: application/json\r\n"+HeaderEventID+": "...)
	b = append(b, id...)
	b = append(b, "\r\n"+HeaderSignature+": "...)
	b = append(b, sig...)
	b = append(b, "\r\n"+HeaderTimestamp+": "...)
	b = append(b, ts...)
	b = append(b, "\r\nAccept-Encoding: gzip\r\n\r\n"...)
	return append(b, body...)
}

// directPool holds the direct path's connections, per host:port at most
// maxConns open and maxIdle idle, an idle one closed after idleTimeout.
type directPool struct {
	dial        func(ctx context.Context, network, addr string) (net.Conn, error)
	maxConns    int
	maxIdle     int
	idleTimeout time.Duration

	mu    sync.Mutex
	hosts map[string]*directHost
	sweep *time.Timer // closes expired idle connections; nil when none is idle
}

type directHost struct {
	idle    []*directConn // most recently used last
	open    int
	waiters int
	freed   chan struct{} // closed when a connection comes back or closes
}

type directConn struct {
	net.Conn
	addr   string
	br     *bufio.Reader
	used   time.Time
	reused bool
}

func newDirectPool(dial func(context.Context, string, string) (net.Conn, error), maxConns, maxIdle int, idleTimeout time.Duration) *directPool {
	return &directPool{dial: dial, maxConns: maxConns, maxIdle: maxIdle, idleTimeout: idleTimeout, hosts: map[string]*directHost{}}
}

// get returns a connection to addr with deadline set: an idle one still
// open, or a new one when fewer than maxConns are open; otherwise it waits
// for one until ctx ends (without wait: errWouldWait).
func (p *directPool) get(ctx context.Context, addr string, deadline time.Time, wait bool) (*directConn, error) {
	for {
		p.mu.Lock()
		h := p.hosts[addr]
		if h == nil {
			h = &directHost{}
			p.hosts[addr] = h
		}
		if n := len(h.idle); n > 0 {
			c := h.idle[n-1]
			h.idle[n-1] = nil
			h.idle = h.idle[:n-1]
			p.mu.Unlock()
			if time.Since(c.used) < p.idleTimeout && c.SetDeadline(deadline) == nil && c.br.Buffered() == 0 && connAlive(c.Conn) {
				c.reused = true
				return c, nil
			}
			p.discard(c)
			continue
		}
		if h.open < p.maxConns {
			h.open++
			p.mu.Unlock()
			dctx, cancel := context.WithDeadline(ctx, deadline)
			conn, err := p.dial(dctx, "tcp", addr)
			cancel()
			if err != nil {
				p.closed1(addr)
				return nil, err
			}
			if err := conn.SetDeadline(deadline); err != nil {
				conn.Close()
				p.closed1(addr)
				return nil, err
			}
			return &directConn{Conn: conn, addr: addr, br: bufio.NewReader(conn)}, nil
		}
		if !wait {
			p.mu.Unlock()
			return nil, errWouldWait
		}
		if h.freed == nil {
			h.freed = make(chan struct{})
		}
		freed := h.freed
		h.waiters++
		p.mu.Unlock()
		timer := time.NewTimer(time.Until(deadline))
		var err error
		select {
		case <-freed:
		case <-ctx.Done():
			err = ctx.Err()
		case <-timer.C:
			err = context.DeadlineExceeded
		}
		timer.Stop()
		p.mu.Lock()
		h.waiters--
		p.mu.Unlock()
		if err != nil {
			return nil, err
		}
	}
}

// freedLocked wakes those waiting for a connection to h. Called with p.mu
// held.
func (h *directHost) freedLocked() {
	if h.waiters > 0 && h.freed != nil {
		close(h.freed)
		h.freed = nil
	}
}

// put gives c back: kept idle when reusable, closed otherwise.
func (p *directPool) put(c *directConn, reusable bool) {
	if !reusable {
		p.discard(c)
		return
	}
	c.used = time.Now()
	p.mu.Lock()
	h := p.hosts[c.addr]
	if len(h.idle) >= p.maxIdle {
		p.mu.Unlock()
		p.discard(c)
		return
	}
	h.idle = append(h.idle, c)
	h.freedLocked()
	if p.sweep == nil {
		p.sweep = time.AfterFunc(p.idleTimeout, p.sweepIdle)
	}
	p.mu.Unlock()
}

// discard closes c and frees its place.
func (p *directPool) discard(c *directConn) {
	c.Close()
	p.closed1(c.addr)
}

func (p *directPool) closed1(addr string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	h := p.hosts[addr]
	h.open--
	h.freedLocked()
	if h.open == 0 && h.waiters == 0 {
		delete(p.hosts, addr)
	}
}

// sweepIdle closes the idle connections unused for idleTimeout.
func (p *directPool) sweepIdle() {
	var expired []*directConn
	now := time.Now()
	p.mu.Lock()
	p.sweep = nil
	next := time.Duration(0)
	for _, h := range p.hosts {
		kept := h.idle[:0]
		for _, c := range h.idle {
			if age := now.Sub(c.used); age >= p.idleTimeout {
				expired = append(expired, c)
			} else {
				kept = append(kept, c)
				if next == 0 || p.idleTimeout-age < next {
					next = p.idleTimeout - age
				}
			}
		}
		clear(h.idle[len(kept):])
		h.idle = kept
	}
	if next > 0 {
		p.sweep = time.AfterFunc(next, p.sweepIdle)
	}
	p.mu.Unlock()
	for _, c := range expired {
		p.discard(c)
	}
}

// closeIdle closes the idle connections.
func (p *directPool) closeIdle() {
	var idle []*directConn
	p.mu.Lock()
	for _, h := range p.hosts {
		idle = append(idle, h.idle...)
		clear(h.idle)
		h.idle = h.idle[:0]
	}
	p.mu.Unlock()
	for _, c := range idle {
		p.discard(c)
	}
}

// maxInformational bounds the 1xx answers read before the final one, as
// net/http does.
const maxInformational = 5

// exchange is a request written and its answer not read yet.
type exchange struct {
	c        *directConn
	stop     func() bool // ends the watch of ctx
	deadline time.Time
}

// errWouldWait: send without wait found addr's connections all in use.
var errWouldWait = errors.New("httpdelivery: every connection to the host is in use")

// send writes req to a connection to addr. Without wait, it returns
// errWouldWait rather than wait for a connection to come back.
func (p *directPool) send(ctx context.Context, addr string, deadline time.Time, req []byte, wait bool) (exchange, error) {
	if err := ctx.Err(); err != nil {
		return exchange{}, err
	}
	for retry := true; ; retry = false {
		c, err := p.get(ctx, addr, deadline, wait)
		if err != nil {
			if err == errWouldWait {
				return exchange{}, err
			}
			return exchange{}, ctxErr(ctx, deadline, err)
		}
		stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
		n, err := c.Write(req)
		if err != nil {
			stop()
			p.discard(c)
			if retry && c.reused && n == 0 && ctx.Err() == nil {
				// Nothing went out on a kept connection the consumer had
				// closed: a new one, as net/http does.
				continue
			}
			return exchange{}, ctxErr(ctx, deadline, err)
		}
		return exchange{c: c, stop: stop, deadline: deadline}, nil
	}
}

// receive reads the answer of x.
func (p *directPool) receive(ctx context.Context, x exchange) (*http.Response, error) {
	c := x.c
	resp, err := readResponse(c.br)
	if err != nil {
		x.stop()
		p.discard(c)
		return nil, ctxErr(ctx, x.deadline, err)
	}
	body := &directBody{rc: resp.Body, c: c, p: p, stop: x.stop,
		keep: !resp.Close && resp.StatusCode != http.StatusSwitchingProtocols}
	resp.Body = body
	if resp.Header.Get("Content-Encoding") == "gzip" && (resp.StatusCode < 200 || resp.StatusCode > 299) {
		// Asked for with Accept-Encoding, as net/http does: the start
		// of a failed answer goes into the error, decompressed. Such a
		// connection is not kept.
		body.keep = false
		resp.Body = &gunzipBody{body: body}
		resp.Header.Del("Content-Encoding")
	}
	return resp, nil
}

// readResponse reads the final answer, skipping 1xx ones (but 101).
func readResponse(br *bufio.Reader) (*http.Response, error) {
	for i := 0; ; i++ {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			return resp, nil
		}
		if i == maxInformational {
			return nil, errors.New("httpdelivery: too many 1xx informational responses")
		}
	}
}

// ctxErr returns ctx's error for a failure that ctx or the deadline caused,
// err otherwise.
func ctxErr(ctx context.Context, deadline time.Time, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	if errors.Is(err, os.ErrDeadlineExceeded) && !time.Now().Before(deadline) {
		return context.DeadlineExceeded
	}
	return err
}

// directBody is a response body that gives its connection back on Close:
// to the idle pool when it was read to its end and may be kept.
type directBody struct {
	rc   io.ReadCloser
	c    *directConn
	p    *directPool
	stop func() bool
	keep bool
	eof  bool
	done bool
}

func (b *directBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if err == io.EOF {
		b.eof = true
	}
	return n, err
}

func (b *directBody) Close() error {
	if b.done {
		return nil
	}
	b.done = true
	// stop is false when ctx ended meanwhile: its deadline may be set on
	// the connection now.
	keep := b.stop() && b.keep && b.eof
	b.p.put(b.c, keep)
	return nil
}

// gunzipBody decompresses a gzip answer's body as it is read.
type gunzipBody struct {
	body *directBody
	zr   *gzip.Reader
	err  error
}

func (g *gunzipBody) Read(p []byte) (int, error) {
	if g.zr == nil && g.err == nil {
		g.zr, g.err = gzip.NewReader(g.body)
	}
	if g.err != nil {
		return 0, g.err
	}
	return g.zr.Read(p)
}

func (g *gunzipBody) Close() error { return g.body.Close() }
