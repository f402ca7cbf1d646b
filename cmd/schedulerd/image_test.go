package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The runtime user of the distroless nonroot image.
const imageUID, imageGID = 65532, 65532

// finalStage is what the Dockerfile's last stage declares.
type finalStage struct {
	env     [][2]string // in order
	user    string
	chowned map[string]string // destination -> --chown of the COPY that creates it
	volumes []string
}

// readFinalStage parses the instructions of the Dockerfile's last stage
// that the image's start-up depends on.
func readFinalStage(t *testing.T) finalStage {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	var cur strings.Builder
	for _, l := range strings.Split(string(raw), "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "#") {
			continue
		}
		if s, ok := strings.CutSuffix(l, "\\"); ok {
			cur.WriteString(s + " ")
			continue
		}
		cur.WriteString(l)
		if s := strings.TrimSpace(cur.String()); s != "" {
			lines = append(lines, s)
		}
		cur.Reset()
	}
	var st finalStage
	for _, l := range lines {
		f := strings.Fields(l)
		switch strings.ToUpper(f[0]) {
		case "FROM":
			st = finalStage{chowned: map[string]string{}}
		case "ENV":
			if len(f) == 3 && !strings.Contains(f[1], "=") {
				st.env = append(st.env, [2]string{f[1], f[2]})
				continue
			}
			for _, kv := range f[1:] {
				k, v, ok := strings.Cut(kv, "=")
				if !ok {
					t.Fatalf("Dockerfile: cannot read ENV %q", l)
				}
				st.env = append(st.env, [2]string{k, strings.Trim(v, `"`)})
			}
		case "USER":
			st.user = f[1]
		case "COPY":
			chown := ""
			for _, a := range f[1 : len(f)-1] {
				if v, ok := strings.CutPrefix(a, "--chown="); ok {
					chown = v
				}
			}
			st.chowned[strings.TrimSuffix(f[len(f)-1], "/")] = chown
		case "VOLUME":
			for _, v := range strings.Fields(strings.NewReplacer("[", " ", "]", " ", ",", " ", `"`, " ").Replace(strings.Join(f[1:], " "))) {
				st.volumes = append(st.volumes, strings.TrimSuffix(v, "/"))
			}
		}
	}
	return st
}

func (st finalStage) lookup(k string) string {
	for _, kv := range st.env {
		if kv[0] == k {
			return kv[1]
		}
	}
	return ""
}

// The image must start on its own: its data directory exists, belongs to
// the unprivileged user it runs as, and is a volume. The binary then runs
// with the image's environment as that user and must become ready.
func TestImageStartsAlone(t *testing.T) {
	st := readFinalStage(t)
	dataDir := st.lookup("SCHEDULER_DATA_DIR")
	if dataDir == "" {
		t.Fatal("the image sets no SCHEDULER_DATA_DIR")
	}
	if st.user != "nonroot:nonroot" && st.user != fmt.Sprintf("%d:%d", imageUID, imageGID) {
		t.Fatalf("USER %q, want the distroless nonroot user", st.user)
	}
	chown, ok := st.chowned[dataDir]
	if !ok {
		t.Fatalf("the final stage creates no %s, which nonroot cannot create itself", dataDir)
	}
	if chown != "nonroot:nonroot" && chown != fmt.Sprintf("%d:%d", imageUID, imageGID) {
		t.Fatalf("%s is copied with --chown=%q, not owned by the runtime user", dataDir, chown)
	}
	if !slices.Contains(st.volumes, dataDir) {
		t.Errorf("%s is not declared a VOLUME (volumes: %v)", dataDir, st.volumes)
	}

	if os.Geteuid() != 0 {
		t.Skip("running the binary as the image's user 65532 needs root")
	}
	// A root the unprivileged user can traverse, holding the binary and the
	// data directory as the image has it: mode 0700, owned by 65532.
	root, err := os.MkdirTemp("", "schedulerd-image")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	bin := filepath.Join(root, "app")
	data := filepath.Join(root, filepath.FromSlash(dataDir))
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(data), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(data, imageUID, imageGID); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(binPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}

	// The image's environment, nothing inherited; the only changes are the
	// data directory's place on this machine and a free loopback port
	// instead of :8080, which other processes here may hold.
	env := []string{"HOME=/home/nonroot"}
	for _, kv := range st.env {
		switch kv[0] {
		case "SCHEDULER_DATA_DIR":
			kv[1] = data
		case "SCHEDULER_LISTEN_ADDR":
			kv[1] = "127.0.0.1:0"
		}
		env = append(env, kv[0]+"="+kv[1])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.Command(bin)
	cmd.Dir = root
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: imageUID, Gid: imageGID}}
	var logs bytes.Buffer
	cmd.Stderr = &lockedWriter{w: &logs}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	banner := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := bannerRE.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case banner <- m[1]:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		exited <- cmd.Wait()
	}()
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("exit after SIGTERM: %v\n%s", err, &logs)
			}
		case <-time.After(40 * time.Second):
			_ = cmd.Process.Kill()
			t.Errorf("no exit within 40s of SIGTERM")
		}
	}()

	var base string
	select {
	case base = <-banner:
	case err := <-exited:
		exited <- err
		t.Fatalf("exited before listening (%v):\n%s", err, &logs)
	case <-ctx.Done():
		t.Fatalf("not listening within the deadline:\n%s", &logs)
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/readyz", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("/readyz not 200 before the deadline:\n%s", &logs)
		}
	}
	info, err := os.Stat(filepath.Join(data, "schedulerd.db"))
	if err != nil {
		t.Fatalf("no store in the data directory: %v", err)
	}
	if uid := info.Sys().(*syscall.Stat_t).Uid; uid != imageUID {
		t.Errorf("store file owned by uid %d, want %d", uid, imageUID)
	}
}
