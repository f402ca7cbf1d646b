package main

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/schedulerd/schedulerd/app"
)

// --version prints the module version the go tool recorded in the binary,
// and starts nothing (no data directory, no listener).
func TestVersionFromBuildInfo(t *testing.T) {
	out, err := exec.Command("go", "version", "-m", binPath).Output()
	if err != nil {
		t.Fatalf("go version -m: %v", err)
	}
	m := regexp.MustCompile(`(?m)^\tmod\t\S+\t(\S+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("no main module line in:\n%s", out)
	}
	want := "schedulerd " + string(m[1]) + "\n"
	dir := t.TempDir()
	for _, flag := range []string{"--version", "-version"} {
		cmd := exec.Command(binPath, flag)
		cmd.Dir = dir
		got, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: %v", flag, err)
		}
		if string(got) != want {
			t.Errorf("%s printed %q, want %q", flag, got, want)
		}
	}
	if entries, _ := filepath.Glob(filepath.Join(dir, "*")); len(entries) != 0 {
		t.Errorf("--version created %v", entries)
	}
}

// A version given at link time wins over the recorded one.
func TestVersionFromLdflags(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "schedulerd")
	if out, err := exec.Command("go", "build", "-ldflags=-X main.version=v9.8.7-test", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	got, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(string(got)) != "schedulerd v9.8.7-test" {
		t.Errorf("--version printed %q", got)
	}
}

func TestVersionInProcess(t *testing.T) {
	var banner bytes.Buffer
	if err := runWithBanner(context.Background(), []string{"--version"}, func(string) string { return "" }, &banner, &banner, app.Hooks{}); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(banner.String(), "schedulerd ") || strings.TrimSpace(strings.TrimPrefix(banner.String(), "schedulerd ")) == "" {
		t.Errorf("printed %q", banner.String())
	}
}
