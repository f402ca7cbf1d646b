package app

import (
	"io/fs"
	"path"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"

	"github.com/schedulerd/schedulerd/internal/procfs"
)

// DefaultGCPercent is the garbage collector's target unless configured.
// The store's data lives outside the Go heap (bbolt maps its file, MongoDB
// holds its own), so the live heap is small while intake allocates a few
// kilobytes a job: at Go's default of 100 the collector runs every few
// batches. 400 trades a heap up to five times its live size for about a
// fifth less CPU a created job (docs/benchmarks.md); the soft memory
// limit (DefaultMemoryLimitPercent) keeps that growth within the memory
// the process has.
const DefaultGCPercent = 400

// DefaultMemoryLimitPercent is the Go runtime's soft memory limit as a
// share of the memory limit of the process's cgroup, as container runtimes
// and systemd set it, or of the machine's memory without one.
const DefaultMemoryLimitPercent = 90

// MemorySettings are the Go runtime's memory settings after
// ApplyMemorySettings.
type MemorySettings struct {
	GCPercent int   // the garbage collector's target; -1: off (GOGC=off)
	Limit     int64 // the soft memory limit in bytes; math.MaxInt64: none
	// LimitOf is what Limit is a share of: "cgroup" (its memory limit) or
	// "machine" (MemTotal); "" when ApplyMemorySettings did not set it.
	LimitOf string
	// Of is the size of what Limit is a share of, in bytes.
	Of int64
}

// ApplyMemorySettings sets the garbage collector's target to gcPercent and
// the soft memory limit to limitPercent of the memory limit of the
// process's cgroup (cgroupMemoryLimit), or of the machine's memory
// (MemTotal of proc/meminfo) without one, both read from root
// (os.DirFS("/")), unless GOGC or GOMEMLIMIT (read with getenv) is set:
// the runtime has then taken that at start and it stands. It returns the
// settings in force and a func that puts the previous ones back. It is for
// the start of a process, before anything else runs.
func ApplyMemorySettings(gcPercent, limitPercent int, getenv func(string) string, root fs.FS) (MemorySettings, func()) {
	var got MemorySettings
	// SetGCPercent is the only way to read the target: set, then put the
	// runtime's own back when GOGC is set.
	oldGC := debug.SetGCPercent(gcPercent)
	if getenv("GOGC") != "" {
		debug.SetGCPercent(oldGC)
		gcPercent = oldGC
	}
	got.GCPercent = gcPercent
	oldLimit := debug.SetMemoryLimit(-1) // a negative input only reads it
	got.Limit = oldLimit
	if getenv("GOMEMLIMIT") == "" && limitPercent > 0 {
		if n, ok := cgroupMemoryLimit(root); ok {
			got.LimitOf, got.Of = "cgroup", n
		} else if n, ok := machineMemory(root); ok {
			got.LimitOf, got.Of = "machine", n
		}
		if got.LimitOf != "" {
			got.Limit = int64(float64(got.Of) * float64(limitPercent) / 100)
			debug.SetMemoryLimit(got.Limit)
		}
	}
	return got, func() {
		debug.SetGCPercent(oldGC)
		debug.SetMemoryLimit(oldLimit)
	}
}

// cgroupMemoryLimit reads the memory limit of this process's cgroup from
// root, the file system's root: the cgroup named in proc/self/cgroup under
// sys/fs/cgroup (v2: memory.max; v1: the memory controller's
// memory.limit_in_bytes), else the one mounted at sys/fs/cgroup itself, as
// a container with its own cgroup namespace sees its limit. False when no
// such file is there or it says there is no limit.
func cgroupMemoryLimit(root fs.FS) (int64, bool) {
	var v1, v2 string // the cgroup's path in each hierarchy
	if raw, err := fs.ReadFile(root, "proc/self/cgroup"); err == nil {
		for line := range strings.Lines(string(raw)) {
			// hierarchy-ID:controllers:path
			f := strings.SplitN(strings.TrimSpace(line), ":", 3)
			if len(f) != 3 {
				continue
			}
			switch {
			case f[0] == "0" && f[1] == "":
				v2 = f[2]
			case slices.Contains(strings.Split(f[1], ","), "memory"):
				v1 = f[2]
			}
		}
	}
	var names []string
	if v2 != "" {
		names = append(names, path.Join("sys/fs/cgroup", v2, "memory.max"))
	}
	if v1 != "" {
		names = append(names, path.Join("sys/fs/cgroup/memory", v1, "memory.limit_in_bytes"))
	}
	names = append(names, "sys/fs/cgroup/memory.max", "sys/fs/cgroup/memory/memory.limit_in_bytes")
	for _, name := range names {
		raw, err := fs.ReadFile(root, name)
		if err != nil {
			continue
		}
		return parseCgroupLimit(string(raw))
	}
	return 0, false
}

// unlimitedCgroup is the least limit that means none: cgroup v1 writes
// "no limit" as the largest page-aligned int64.
const unlimitedCgroup = 1 << 62

// parseCgroupLimit reads a memory limit file's value, a number of bytes.
// False for "max" (v2), a number too large to be a limit (v1) and
// anything unreadable: no limit.
func parseCgroupLimit(s string) (int64, bool) {
	n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
	if err != nil || n == 0 || n >= unlimitedCgroup {
		return 0, false
	}
	return int64(n), true
}

// machineMemory reads MemTotal from root's proc/meminfo, in bytes.
func machineMemory(root fs.FS) (int64, bool) {
	raw, err := fs.ReadFile(root, "proc/meminfo")
	if err != nil {
		return 0, false
	}
	n, err := procfs.Bytes(string(raw), "MemTotal")
	return n, err == nil && n > 0
}
