package connlimit_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/internal/connlimit"
)

// server runs a real http.Server on 127.0.0.1 behind l. Requests to /block
// wait for unblock; every connection the server reports idle is sent on
// idle.
type server struct {
	addr    string
	idle    chan struct{}
	active  chan struct{}
	unblock chan struct{}
}

func start(t *testing.T, l *connlimit.Limiter) *server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &server{addr: ln.Addr().String(), idle: make(chan struct{}, 1000), active: make(chan struct{}, 1000), unblock: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	mux.HandleFunc("/block", func(w http.ResponseWriter, r *http.Request) {
		s.active <- struct{}{}
		<-s.unblock
	})
	srv := &http.Server{Handler: mux, ConnState: func(c net.Conn, st http.ConnState) {
		l.ConnState(c, st)
		if st == http.StateIdle {
			s.idle <- struct{}{}
		}
	}}
	go srv.Serve(l.Listener(ln))
	t.Cleanup(func() {
		close(s.unblock)
		srv.Close()
	})
	return s
}

// dial connects to s from the local address from ("" for any).
func (s *server) dial(t *testing.T, from string) (net.Conn, *bufio.Reader) {
	t.Helper()
	d := net.Dialer{Timeout: 10 * time.Second}
	if from != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(from)}
	}
	c, err := d.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, bufio.NewReader(c)
}

// get sends GET path on c and returns the response's status, or an error
// if the connection was closed instead.
func get(c net.Conn, br *bufio.Reader, path string) (int, error) {
	c.SetDeadline(time.Now().Add(10 * time.Second))
	defer c.SetDeadline(time.Time{})
	if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		return 0, err
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, err
}

// idleConn opens a keep-alive connection from from that has been served
// one request and that the server reports idle.
func (s *server) idleConn(t *testing.T, from string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, br := s.dial(t, from)
	if code, err := get(c, br, "/"); err != nil || code != http.StatusOK {
		t.Fatalf("GET /: %d %v", code, err)
	}
	<-s.idle
	return c, br
}

// waitClosed fails the test unless the server closes c (or ten seconds
// pass).
func waitClosed(t *testing.T, c net.Conn, br *bufio.Reader, what string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := br.ReadByte()
	if !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("%s: read returned %v, want the server to close the connection", what, err)
	}
}

// TestIdleFloodMakesRoomPerAddress floods one address with idle
// connections beyond its cap: the oldest are closed first, and a new
// request from that address and from another is served.
func TestIdleFloodMakesRoomPerAddress(t *testing.T) {
	l := connlimit.New(0, 5, nil)
	s := start(t, l)
	type cr struct {
		c  net.Conn
		br *bufio.Reader
	}
	var flood []cr
	for range 20 {
		c, br := s.idleConn(t, "127.0.0.1")
		flood = append(flood, cr{c, br})
	}
	for i, f := range flood[:15] {
		waitClosed(t, f.c, f.br, fmt.Sprintf("flood connection %d", i))
	}
	if n := l.Open(); n != 5 {
		t.Fatalf("%d connections tracked, want the cap of 5", n)
	}
	// The newest are kept: the last one still answers.
	last := flood[len(flood)-1]
	if code, err := get(last.c, last.br, "/"); err != nil || code != http.StatusOK {
		t.Fatalf("newest flood connection: %d %v", code, err)
	}
	for _, from := range []string{"127.0.0.1", "127.0.0.2"} {
		c, br := s.dial(t, from)
		if code, err := get(c, br, "/"); err != nil || code != http.StatusOK {
			t.Fatalf("GET / from %s during the flood: %d %v", from, code, err)
		}
	}
}

// TestTotalCapClosesOldestIdleOfAnyAddress: the total cap closes the
// oldest idle connection whatever its address.
func TestTotalCapClosesOldestIdleOfAnyAddress(t *testing.T) {
	l := connlimit.New(3, 0, nil)
	s := start(t, l)
	oldest, obr := s.idleConn(t, "127.0.0.2")
	s.idleConn(t, "127.0.0.1")
	s.idleConn(t, "127.0.0.1")
	c, br := s.dial(t, "127.0.0.1")
	if code, err := get(c, br, "/"); err != nil || code != http.StatusOK {
		t.Fatalf("GET / at the cap: %d %v", code, err)
	}
	waitClosed(t, oldest, obr, "oldest idle connection")
}

// TestBusyConnectionsAreNotClosed: at the cap with every connection busy
// with a request, a new connection is refused and the busy ones finish.
func TestBusyConnectionsAreNotClosed(t *testing.T) {
	shed := make(chan string, 10)
	l := connlimit.New(0, 2, func(r string) { shed <- r })
	s := start(t, l)
	results := make(chan error, 2)
	for range 2 {
		c, br := s.dial(t, "127.0.0.1")
		go func() {
			code, err := get(c, br, "/block")
			if err == nil && code != http.StatusOK {
				err = errors.New(http.StatusText(code))
			}
			results <- err
		}()
		<-s.active
	}
	c, br := s.dial(t, "127.0.0.1")
	waitClosed(t, c, br, "connection over the cap of busy ones")
	s.unblock <- struct{}{}
	s.unblock <- struct{}{}
	for range 2 {
		if err := <-results; err != nil {
			t.Fatalf("busy request: %v", err)
		}
	}
	if r := <-shed; r != connlimit.ShedRefused || len(shed) != 0 {
		t.Fatalf("shed %q and %d more, want one %s", r, len(shed), connlimit.ShedRefused)
	}
}
