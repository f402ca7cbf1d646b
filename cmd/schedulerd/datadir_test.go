package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// A second schedulerd on a data directory in use exits saying the
// directory is locked by another process, and names it.
func TestSecondServerOnSameDataDir(t *testing.T) {
	dir := t.TempDir()
	first := start(t, dir)
	defer first.stop(t)
	cmd := exec.Command(binPath)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "SCHEDULER_LISTEN_ADDR=127.0.0.1:0")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("second schedulerd on the same data directory did not fail:\n%s", out)
	}
	// With no flags the data directory is ./data.
	msg := string(out)
	if !strings.Contains(msg, "./data: data directory is locked by another process") {
		t.Fatalf("second schedulerd said %q; want it to say the data directory ./data is locked by another process", msg)
	}
}
