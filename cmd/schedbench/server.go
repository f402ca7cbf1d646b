package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/schedulerd/schedulerd/internal/procfs"
)

// server is a schedulerd process schedbench started (-server) or was
// pointed at (-server-pid): its CPU time is read from /proc, apart from
// schedbench's own consumer and clients.
type server struct {
	pid     int
	base    string
	dataDir string // "" when not known
	cmd     *exec.Cmd
	exited  chan struct{}
}

// startServer runs the schedulerd binary bin on a new data directory
// (under dir, or a temporary one) with the embedded store, a generated
// admin key and signing secret, and waits until it listens.
func startServer(ctx context.Context, o *options, stderr io.Writer) (*server, func(), error) {
	env, removeDir, err := embeddedEnv(o)
	if err != nil {
		return nil, nil, err
	}
	o.adminKey = "sk_schedbench_" + randomHex(16)
	env["SCHEDULER_ADMIN_KEY"] = o.adminKey
	cmd := exec.Command(o.server)
	cmd.Env = os.Environ()
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("start %s: %w", o.server, err)
	}
	s := &server{pid: cmd.Process.Pid, dataDir: env["SCHEDULER_DATA_DIR"], cmd: cmd, exited: make(chan struct{})}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			if rest, ok := strings.CutPrefix(line, "schedulerd listening on "); ok {
				select {
				case addr <- strings.TrimPrefix(strings.Fields(rest)[0], "http://"):
				default:
				}
			}
		}
	}()
	go func() {
		_ = cmd.Wait()
		close(s.exited)
	}()
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-s.exited
		}
		removeDir()
	}
	select {
	case s.base = <-addr:
		return s, stop, nil
	case <-s.exited:
		stop()
		return nil, nil, fmt.Errorf("%s exited before it listened", o.server)
	case <-time.After(60 * time.Second):
		stop()
		return nil, nil, fmt.Errorf("%s did not listen within 60s", o.server)
	case <-ctx.Done():
		stop()
		return nil, nil, ctx.Err()
	}
}

// cpuTime is a process's user and system CPU time.
type cpuTime struct{ user, sys time.Duration }

func (c cpuTime) total() time.Duration { return c.user + c.sys }

func (c cpuTime) sub(d cpuTime) cpuTime { return cpuTime{c.user - d.user, c.sys - d.sys} }

func (c cpuTime) String() string {
	return fmt.Sprintf("%.2f s (user %.2f, sys %.2f)", c.total().Seconds(), c.user.Seconds(), c.sys.Seconds())
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times: 100 on every
// Linux architecture Go supports.
const clockTicks = 100

// procCPU reads utime and stime of process pid from /proc/PID/stat.
func procCPU(pid int) (cpuTime, error) {
	raw, err := os.ReadFile(procFile(pid, "stat"))
	if err != nil {
		return cpuTime{}, err
	}
	return parseStat(string(raw))
}

// parseStat reads utime and stime (fields 14 and 15) of a /proc/PID/stat
// line; the command name (field 2) may hold spaces and parentheses.
func parseStat(line string) (cpuTime, error) {
	i := strings.LastIndexByte(line, ')')
	if i < 0 {
		return cpuTime{}, errors.New("proc stat: no command name")
	}
	f := strings.Fields(line[i+1:])
	// f[0] is field 3 (state): utime is field 14, stime field 15.
	if len(f) < 13 {
		return cpuTime{}, fmt.Errorf("proc stat: %d fields after the command name", len(f))
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return cpuTime{}, fmt.Errorf("proc stat: %w", err)
	}
	tick := time.Second / clockTicks
	return cpuTime{time.Duration(u) * tick, time.Duration(s) * tick}, nil
}

// procFile is the path of process pid's /proc file name (pid 0: this
// process).
func procFile(pid int, name string) string {
	if pid == 0 {
		return "/proc/self/" + name
	}
	return fmt.Sprintf("/proc/%d/%s", pid, name)
}

// procPeakRSS reads VmHWM, the most resident memory process pid (0: this
// process) has had, from /proc/PID/status.
func procPeakRSS(pid int) (int64, error) {
	raw, err := os.ReadFile(procFile(pid, "status"))
	if err != nil {
		return 0, err
	}
	return procfs.Bytes(string(raw), "VmHWM")
}

// selfCPU is this process's CPU time.
func selfCPU() cpuTime {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return cpuTime{}
	}
	return cpuTime{time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())}
}

// cpuMeter reads the CPU time of the measured server (or, in process, of
// the whole schedbench process) at the phases of a run.
type cpuMeter struct {
	pid   int // 0: this process
	marks []cpuMark
}

type cpuMark struct {
	name    string
	at      time.Time
	cpu     cpuTime
	self    cpuTime // this process's (with -server: the consumer's and clients')
	written int64   // write_bytes of the measured process; -1: unreadable
}

func (m *cpuMeter) read() cpuTime {
	if m.pid == 0 {
		return selfCPU()
	}
	c, err := procCPU(m.pid)
	if err != nil {
		return cpuTime{}
	}
	return c
}

// peakRSS is the measured process's peak resident memory in bytes; -1
// when it cannot be read.
func (m *cpuMeter) peakRSS() int64 {
	n, err := procPeakRSS(m.pid)
	if err != nil {
		return -1
	}
	return n
}

// mark records the CPU time now under name.
func (m *cpuMeter) mark(name string) {
	if m == nil {
		return
	}
	w, err := procWriteBytes(m.pid)
	if err != nil {
		w = -1
	}
	m.marks = append(m.marks, cpuMark{name, time.Now(), m.read(), selfCPU(), w})
}

// writtenBetween is the bytes the measured process had written to storage
// from mark a to mark b; false when either mark or reading is missing.
func (m *cpuMeter) writtenBetween(a, b string) (int64, bool) {
	x, y := m.pair(a, b)
	if x == nil || y == nil || x.written < 0 || y.written < 0 {
		return 0, false
	}
	return y.written - x.written, true
}

// procWriteBytes reads write_bytes, the bytes process pid (0: this
// process) caused to be sent to storage, from /proc/PID/io.
func procWriteBytes(pid int) (int64, error) {
	raw, err := os.ReadFile(procFile(pid, "io"))
	if err != nil {
		return 0, err
	}
	return parseWriteBytes(string(raw))
}

// parseWriteBytes reads the "write_bytes: N" line of a /proc/PID/io.
func parseWriteBytes(text string) (int64, error) {
	for line := range strings.Lines(text) {
		if rest, ok := strings.CutPrefix(line, "write_bytes:"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(rest), 10, 64)
			if err != nil || n < 0 {
				return 0, fmt.Errorf("proc io: write_bytes %q", strings.TrimSpace(rest))
			}
			return n, nil
		}
	}
	return 0, errors.New("proc io: no write_bytes line")
}

// between is the CPU time and wall time from mark a to mark b.
func (m *cpuMeter) between(a, b string) (cpuTime, time.Duration, bool) {
	c, _, d, ok := m.between2(a, b)
	return c, d, ok
}

// between2 is between with this process's CPU time over the same span.
func (m *cpuMeter) between2(a, b string) (server, self cpuTime, wall time.Duration, ok bool) {
	x, y := m.pair(a, b)
	if x == nil || y == nil {
		return cpuTime{}, cpuTime{}, 0, false
	}
	return y.cpu.sub(x.cpu), y.self.sub(x.self), y.at.Sub(x.at), true
}

// pair is the marks named a and b (nil where there is none).
func (m *cpuMeter) pair(a, b string) (x, y *cpuMark) {
	for i := range m.marks {
		switch m.marks[i].name {
		case a:
			x = &m.marks[i]
		case b:
			y = &m.marks[i]
		}
	}
	return x, y
}

// dirSize is the bytes of the regular files under dir.
func dirSize(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			info, err := d.Info()
			if err != nil {
				return err
			}
			n += info.Size()
		}
		return nil
	})
	return n, err
}

// memPeak is the most memory a process held at the samples taken: its
// resident set and its proportional set size (PSS: pages shared with other
// processes counted by share), anonymous (the Go heap and stacks) apart
// from file-backed (the embedded store's mapped file, the binary), from
// /proc/PID/smaps_rollup. Each is its own maximum.
type memPeak struct {
	rss, pss, pssAnon, pssFile int64
}

func (m memPeak) String() string {
	return fmt.Sprintf("%s (anonymous %s, file-backed %s; RSS %s)", mib(m.pss), mib(m.pssAnon), mib(m.pssFile), mib(m.rss))
}

// readMem reads process pid's (0: this process's) smaps_rollup.
func readMem(pid int) (memPeak, error) {
	raw, err := os.ReadFile(procFile(pid, "smaps_rollup"))
	if err != nil {
		return memPeak{}, err
	}
	var m memPeak
	var errs [4]error
	m.rss, errs[0] = procfs.Bytes(string(raw), "Rss")
	m.pss, errs[1] = procfs.Bytes(string(raw), "Pss")
	m.pssAnon, errs[2] = procfs.Bytes(string(raw), "Pss_Anon")
	m.pssFile, errs[3] = procfs.Bytes(string(raw), "Pss_File")
	return m, errors.Join(errs[:]...)
}

// sampleMem samples process pid's memory every interval until stop is
// closed, then sends the peaks on the returned channel.
func sampleMem(pid int, interval time.Duration, stop <-chan struct{}) <-chan memPeak {
	out := make(chan memPeak, 1)
	go func() {
		var p memPeak
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			if m, err := readMem(pid); err == nil {
				p.rss, p.pss = max(p.rss, m.rss), max(p.pss, m.pss)
				p.pssAnon, p.pssFile = max(p.pssAnon, m.pssAnon), max(p.pssFile, m.pssFile)
			}
			select {
			case <-stop:
				out <- p
				return
			case <-t.C:
			}
		}
	}()
	return out
}
