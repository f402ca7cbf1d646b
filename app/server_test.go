package app_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"
)

// keepAlive opens a connection from from to addr and has /healthz served
// on it, leaving it open and idle.
func keepAlive(t *testing.T, addr, from string) (net.Conn, *bufio.Reader) {
	t.Helper()
	d := net.Dialer{Timeout: 10 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	br := bufio.NewReader(c)
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("GET /healthz from %s: %v", from, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /healthz from %s: %d", from, resp.StatusCode)
	}
	c.SetDeadline(time.Time{})
	return c, br
}

// waitClosedByServer fails the test unless the server closes c within ten
// seconds.
func waitClosedByServer(t *testing.T, c net.Conn, br *bufio.Reader) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := br.ReadByte(); !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("read on an idle connection returned %v, want the server to close it", err)
	}
}

func TestServerClosesIdleConnections(t *testing.T) {
	a, _ := runApp(t, map[string]string{"SCHEDULER_SERVER_IDLE_TIMEOUT": "200ms"})
	c, br := keepAlive(t, a.Addr(), "127.0.0.1")
	waitClosedByServer(t, c, br)
}

// TestServerIdleFloodPerClient: one address holds more idle connections
// than its cap; its oldest are closed, and /healthz from it and from
// another address is still answered.
func TestServerIdleFloodPerClient(t *testing.T) {
	a, _ := runApp(t, map[string]string{"SCHEDULER_SERVER_MAX_CONNS_PER_CLIENT": "10"})
	first, br := keepAlive(t, a.Addr(), "127.0.0.1")
	for range 30 {
		keepAlive(t, a.Addr(), "127.0.0.1")
	}
	waitClosedByServer(t, first, br)
	keepAlive(t, a.Addr(), "127.0.0.1")
	keepAlive(t, a.Addr(), "127.0.0.2")
}
