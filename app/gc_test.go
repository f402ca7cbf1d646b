package app_test

import (
	"maps"
	"math"
	"runtime/debug"
	"testing"
	"testing/fstest"

	"github.com/schedulerd/schedulerd/app"
)

// gcPercent reads the runtime's target without changing it.
func gcPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

func env(kv ...string) func(string) string {
	return func(k string) string {
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i] == k {
				return kv[i+1]
			}
		}
		return ""
	}
}

// The GC target and the soft memory limit from the settings and the
// cgroup's limit (v2 and v1 layouts, "no limit" in each) or else the
// machine's memory, GOGC and GOMEMLIMIT standing when set, and restore
// putting the previous values back. Not parallel: the settings are the process's.
func TestApplyMemorySettings(t *testing.T) {
	beforeGC, beforeLimit := gcPercent(), debug.SetMemoryLimit(-1)
	const gib = 1 << 30
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	v2 := fstest.MapFS{"sys/fs/cgroup/memory.max": file("2147483648\n")}
	v1 := fstest.MapFS{"sys/fs/cgroup/memory/memory.limit_in_bytes": file("1073741824\n")}
	// A systemd service on cgroup v2 without its own namespace: its limit
	// is under its path; the root's file would be another's.
	service := fstest.MapFS{
		"proc/self/cgroup": file("0::/system.slice/schedulerd.service\n"),
		"sys/fs/cgroup/system.slice/schedulerd.service/memory.max": file("536870912\n"),
		"sys/fs/cgroup/memory.max":                                 file("max\n"),
	}
	// cgroup v1 with the memory controller among several: its path.
	v1Path := fstest.MapFS{
		"proc/self/cgroup": file("5:cpu,cpuacct:/a\n4:memory:/process_api/c24\n0::/\n"),
		"sys/fs/cgroup/memory/process_api/c24/memory.limit_in_bytes": file("3221225472\n"),
		"sys/fs/cgroup/memory/memory.limit_in_bytes":                 file("9223372036854771712\n"),
	}
	// Docker on cgroup v1: /proc/self/cgroup names the host's path, the
	// container's own cgroup is mounted at the root.
	docker := fstest.MapFS{
		"proc/self/cgroup":                           file("4:memory:/docker/0123abcd\n"),
		"sys/fs/cgroup/memory/memory.limit_in_bytes": file("1073741824\n"),
	}
	meminfo := fstest.MapFS{"proc/meminfo": file("MemTotal:        4194304 kB\nMemFree:         1048576 kB\n")}
	with := func(a, b fstest.MapFS) fstest.MapFS {
		out := fstest.MapFS{}
		maps.Copy(out, a)
		maps.Copy(out, b)
		return out
	}
	for _, tc := range []struct {
		name        string
		env         func(string) string
		root        fstest.MapFS
		gc, percent int
		wantGC      int
		wantLimit   int64
		wantOf      string
		wantBase    int64
	}{
		{"v2 limit", env(), v2, 400, 90, 400, 2 * gib * 9 / 10, "cgroup", 2 * gib},
		{"v1 limit", env(), v1, 250, 50, 250, gib / 2, "cgroup", gib},
		{"v2 service path", env(), service, 400, 90, 400, gib / 2 * 9 / 10, "cgroup", gib / 2},
		{"v1 path", env(), v1Path, 400, 50, 400, 3 * gib / 2, "cgroup", 3 * gib},
		{"v1 path not mounted", env(), docker, 400, 50, 400, gib / 2, "cgroup", gib},
		{"cgroup limit over the machine's", env(), with(v2, meminfo), 400, 90, 400, 2 * gib * 9 / 10, "cgroup", 2 * gib},
		{"v2 no limit: the machine's", env(), with(fstest.MapFS{"sys/fs/cgroup/memory.max": file("max\n")}, meminfo), 400, 90, 400, 4 * gib * 9 / 10, "machine", 4 * gib},
		{"v1 no limit: the machine's", env(), with(fstest.MapFS{"sys/fs/cgroup/memory/memory.limit_in_bytes": file("9223372036854771712\n")}, meminfo), 400, 50, 400, 2 * gib, "machine", 4 * gib},
		{"no cgroup files: the machine's", env(), meminfo, 400, 90, 400, 4 * gib * 9 / 10, "machine", 4 * gib},
		{"unreadable limit: the machine's", env(), with(fstest.MapFS{"sys/fs/cgroup/memory.max": file("lots\n")}, meminfo), 400, 90, 400, 4 * gib * 9 / 10, "machine", 4 * gib},
		{"nothing known", env(), fstest.MapFS{}, 400, 90, 400, beforeLimit, "", 0},
		{"meminfo unreadable", env(), fstest.MapFS{"proc/meminfo": file("MemTotal: lots kB\n")}, 400, 90, 400, beforeLimit, "", 0},
		{"meminfo in another unit", env(), fstest.MapFS{"proc/meminfo": file("MemTotal: 4 GB\n")}, 400, 90, 400, beforeLimit, "", 0},
		{"limit off", env(), v2, 400, 0, 400, beforeLimit, "", 0},
		{"GOGC and GOMEMLIMIT stand", env("GOGC", "50", "GOMEMLIMIT", "1GiB"), with(v2, meminfo), 400, 90, beforeGC, beforeLimit, "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, restore := app.ApplyMemorySettings(tc.gc, tc.percent, tc.env, tc.root)
			gc, limit := gcPercent(), debug.SetMemoryLimit(-1)
			restore()
			if got.GCPercent != tc.wantGC || gc != tc.wantGC {
				t.Errorf("GC target: reported %d, runtime %d; want %d", got.GCPercent, gc, tc.wantGC)
			}
			if got.Limit != tc.wantLimit || limit != tc.wantLimit {
				t.Errorf("memory limit: reported %d, runtime %d; want %d", got.Limit, limit, tc.wantLimit)
			}
			if got.LimitOf != tc.wantOf || got.Of != tc.wantBase {
				t.Errorf("limit of %q %d, want of %q %d", got.LimitOf, got.Of, tc.wantOf, tc.wantBase)
			}
			if gcPercent() != beforeGC || debug.SetMemoryLimit(-1) != beforeLimit {
				t.Errorf("restore left GC target %d, limit %d; want %d, %d", gcPercent(), debug.SetMemoryLimit(-1), beforeGC, beforeLimit)
			}
		})
	}
	if beforeLimit != math.MaxInt64 {
		t.Logf("the test process runs with a memory limit of %d", beforeLimit)
	}
}
