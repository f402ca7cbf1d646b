package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestIdleFloodUnderLowFileLimit runs the binary with few file descriptors
// (soft limit 200, hard 256) and holds more idle keep-alive connections
// than it has descriptors: the oldest are closed to make room, so that
// /healthz is still answered, and the start-up log names the raised limit.
func TestIdleFloodUnderLowFileLimit(t *testing.T) {
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		t.Skip("prlimit not installed")
	}
	p := startCmd(t, exec.Command(prlimit, "--nofile=200:256", binPath), t.TempDir())
	addr := strings.TrimPrefix(p.base, "http://")
	var open []net.Conn
	t.Cleanup(func() {
		for _, c := range open {
			c.Close()
		}
	})
	for i := range 400 {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatalf("flood connection %d: %v", i, err)
		}
		open = append(open, c)
		c.SetDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("flood connection %d: no answer: %v\n%s", i, err, p.logs)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get(p.base + "/healthz")
	if err != nil {
		t.Fatalf("/healthz during the flood: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/healthz during the flood: %d", resp.StatusCode)
	}
	p.stop(t)
	if !strings.Contains(p.logs.String(), `"openFilesLimit":256`) {
		t.Fatalf("start-up log does not name the raised open-file limit 256:\n%s", p.logs)
	}
}
