package chaos

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// FerretDB's backend. With PostgreSQL (the default when its server binaries
// are installed) FerretDB answers under three instances that are killed
// mid-query and handles thousands of events; its SQLite backend wedges once
// a few hundred events back up (see ferret_test.go), which keeps those runs
// small. CHAOS_FERRETDB_BACKEND=sqlite forces SQLite, =postgresql fails the
// test instead of falling back when PostgreSQL is missing.
const envBackend = "CHAOS_FERRETDB_BACKEND"

// pgBinDir finds the directory of PostgreSQL's initdb, pg_ctl and postgres:
// CHAOS_PG_BINDIR, then `pg_config --bindir`, then Debian's
// /usr/lib/postgresql/<newest>/bin. Empty if there is none.
func pgBinDir() string {
	ok := func(dir string) bool {
		_, err := os.Stat(filepath.Join(dir, "initdb"))
		return err == nil
	}
	if d := os.Getenv("CHAOS_PG_BINDIR"); d != "" {
		return d
	}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		if d := strings.TrimSpace(string(out)); ok(d) {
			return d
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return pgVersion(dirs[i]) > pgVersion(dirs[j]) })
	for _, d := range dirs {
		if ok(d) {
			return d
		}
	}
	return ""
}

func pgVersion(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

// usePostgres reports whether FerretDB should run on PostgreSQL, failing t
// if that was demanded and is impossible.
func usePostgres(t *testing.T) bool {
	t.Helper()
	switch b := os.Getenv(envBackend); b {
	case "sqlite":
		return false
	case "", "postgresql":
		if pgBinDir() != "" {
			return true
		}
		if b == "postgresql" {
			t.Fatalf("%s=postgresql but no PostgreSQL server binaries were found (set CHAOS_PG_BINDIR)", envBackend)
		}
		t.Logf("PostgreSQL not found: FerretDB runs on SQLite (small runs only)")
		return false
	default:
		t.Fatalf("%s=%q: want sqlite or postgresql", envBackend, b)
		return false
	}
}

// startPostgres creates a PostgreSQL cluster in a temporary directory,
// starts it on a free port of 127.0.0.1 (trust authentication, loopback
// only) and returns the URL of its database "ferretdb". It is stopped when
// t ends. PostgreSQL refuses to run as root, so as root it runs as the
// "postgres" user.
func startPostgres(t *testing.T) string {
	t.Helper()
	bin := pgBinDir()
	dir, err := os.MkdirTemp("", "schedulerd-chaos-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	var asUser []string
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running as root and there is no postgres user to run PostgreSQL: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
		asUser = []string{"runuser", "-u", "postgres", "--"}
	}
	run := func(args ...string) {
		t.Helper()
		full := append(append([]string(nil), asUser...), args...)
		out, err := exec.Command(full[0], full[1:]...).CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
	}
	data := filepath.Join(dir, "data")
	port := freePort(t)
	run(filepath.Join(bin, "initdb"), "-D", data, "-A", "trust", "-U", "postgres", "--no-sync")
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c max_connections=600 -c log_lock_waits=on -c deadlock_timeout=500ms -c log_min_duration_statement=2000", port, dir)
	run(filepath.Join(bin, "pg_ctl"), "-D", data, "-o", opts, "-l", filepath.Join(dir, "postgres.log"), "-w", "start")
	t.Cleanup(func() {
		if t.Failed() {
			if b, err := os.ReadFile(filepath.Join(dir, "postgres.log")); err == nil {
				lines := strings.Split(strings.TrimSpace(string(b)), "\n")
				t.Logf("last lines of postgres.log:\n%s", strings.Join(lines[max(0, len(lines)-60):], "\n"))
			}
		}
		full := append(append([]string(nil), asUser...), filepath.Join(bin, "pg_ctl"), "-D", data, "-m", "immediate", "-w", "stop")
		if out, err := exec.Command(full[0], full[1:]...).CombinedOutput(); err != nil {
			t.Logf("stop PostgreSQL: %v\n%s", err, out)
		}
	})
	run(filepath.Join(bin, "createdb"), "-h", "127.0.0.1", "-p", strconv.Itoa(port), "-U", "postgres", "ferretdb")
	t.Logf("PostgreSQL for FerretDB on 127.0.0.1:%d (%s)", port, bin)
	// FerretDB's pool (50 by default) is raised far above what the
	// instances' client pools can ask of it at once; see startFerret.
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/ferretdb?pool_max_conns=500", port)
}
