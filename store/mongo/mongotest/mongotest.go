// Package mongotest gives tests a MongoDB-protocol server without any setup.
//
// Tests call URI, which returns a connection string naming a fresh database of
// their own. When SCHEDULER_TEST_MONGO_URI is set the database lives on that
// server (a real MongoDB, for example a local replica set); otherwise one
// embedded FerretDB v1 (SQLite backend in a temporary directory) is started
// per test process and shared by every test, because starting it costs far
// more than a database does.
//
// FerretDB v1 is a correctness stand-in only: it has no transactions, TTL or
// partial indexes, and it scans collections without using indexes, so timings
// taken against it say nothing about MongoDB.
//
// StartConfig runs FerretDB as a server in its own right (SQLite files in a
// directory, or PostgreSQL), for a small command that chaos tests can kill
// and restart at the same address.
package mongotest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/FerretDB/FerretDB/ferretdb"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

const (
	// EnvURI names a MongoDB server to test against instead of the embedded
	// FerretDB, for example "mongodb://127.0.0.1:27017/?directConnection=true" for the
	// replica set of docker-compose.yml.
	EnvURI = "SCHEDULER_TEST_MONGO_URI"
	// EnvLog, set to a slog level ("debug", "info"), streams the embedded
	// FerretDB's log to stderr instead of keeping warnings for failed tests.
	EnvLog = "SCHEDULER_TEST_FERRETDB_LOG"
)

// IsRealMongo reports whether SCHEDULER_TEST_MONGO_URI names a server, which
// the benchmarks require: FerretDB timings must never pass for MongoDB's.
func IsRealMongo() bool { return os.Getenv(EnvURI) != "" }

// URI returns a MongoDB URI whose path names a new database used by t alone;
// the database is dropped when t ends. It fails t if no server can be had.
func URI(t testing.TB) string {
	t.Helper()

	base := os.Getenv(EnvURI)
	var mark uint64
	if base == "" {
		srv, err := sharedServer()
		if err != nil {
			t.Fatalf("mongotest: start embedded FerretDB: %v", err)
		}
		base = srv.uri
		mark = srv.logs.mark()
		t.Cleanup(func() {
			if t.Failed() {
				for _, line := range srv.logs.since(mark) {
					t.Log("ferretdb: " + line)
				}
			}
		})
	}

	db := DatabaseName(t)
	uri, err := WithDatabase(base, db)
	if err != nil {
		t.Fatalf("mongotest: %v", err)
	}
	t.Cleanup(func() { dropDatabase(t, uri, db) })
	return uri
}

// DatabaseName returns a database name that is unique in the process and
// recognisable in the server: a random prefix plus the sanitised test name,
// within the 63 characters that both MongoDB and FerretDB accept.
func DatabaseName(t testing.TB) string {
	t.Helper()
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("mongotest: random database name: %v", err)
	}
	var sb strings.Builder
	sb.WriteString("t")
	sb.WriteString(hex.EncodeToString(b[:]))
	sb.WriteByte('_')
	for _, r := range t.Name() {
		if sb.Len() >= 63 {
			break
		}
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_':
			sb.WriteRune(r)
		default:
			sb.WriteByte('_')
		}
	}
	return sb.String()
}

// WithDatabase returns uri with its path replaced by /db, keeping the query
// (replicaSet, authSource and so on).
func WithDatabase(uri, db string) (string, error) {
	u, err := url.Parse(uri)
	if err != nil {
		return "", fmt.Errorf("parse mongo uri: %w", err)
	}
	u.Path = "/" + db
	u.RawPath = ""
	return u.String(), nil
}

// dropDatabase removes a test's database so that a long test run against a
// shared server (or the shared FerretDB's directory) does not keep growing.
func dropDatabase(t testing.TB, uri, db string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client, err := mongo.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		t.Logf("mongotest: drop %s: connect: %v", db, err)
		return
	}
	defer func() { _ = client.Disconnect(ctx) }()
	if err := client.Database(db).Drop(ctx); err != nil {
		t.Logf("mongotest: drop %s: %v", db, err)
	}
}

// server is the one embedded FerretDB of a test process.
type server struct {
	uri  string
	logs *logRing
}

var (
	sharedOnce sync.Once
	shared     *server
	sharedErr  error
)

// sharedServer starts the process's FerretDB on first use. It is never
// stopped: it dies with the test binary, and its directory is in the
// system's temporary directory.
func sharedServer() (*server, error) {
	sharedOnce.Do(func() {
		dir, err := os.MkdirTemp("", "schedulerd-ferretdb-")
		if err != nil {
			sharedErr = fmt.Errorf("temp dir: %w", err)
			return
		}
		logs := newLogRing(2000)
		var handler slog.Handler = slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn})
		if lvl := os.Getenv(EnvLog); lvl != "" {
			var level slog.Level
			if err := level.UnmarshalText([]byte(lvl)); err != nil {
				sharedErr = fmt.Errorf("%s=%q: %w", EnvLog, lvl, err)
				return
			}
			handler = slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})
		}
		uri, _, err := StartConfig(context.Background(), Config{
			Dir:    dir,
			Logger: slog.New(handler).With("component", "ferretdb"),
		})
		if err != nil {
			sharedErr = err
			return
		}
		shared = &server{uri: uri, logs: logs}
	})
	return shared, sharedErr
}

// newMu serialises ferretdb.New, which writes a package variable of
// FerretDB's (version.Get().Package) without a lock, so that the shared
// server and a test's private one can start at the same time.
var newMu sync.Mutex

// Config configures a FerretDB started by StartConfig.
type Config struct {
	// Dir holds the SQLite files, one per database. It is created if missing.
	// Reusing a directory keeps the data of a previous run, which is what a
	// restarted server in a chaos test needs.
	Dir string
	// Addr is the TCP address to listen on; "127.0.0.1:0" (a free port) if
	// empty. A chaos test that restarts the server passes the address of the
	// first run so that clients reconnect to the same URI.
	Addr string
	// Logger receives FerretDB's log; a logger that drops everything below
	// warnings and writes to stderr if nil.
	Logger *slog.Logger
	// PostgreSQLURL, if set, selects FerretDB's PostgreSQL backend
	// (for example "postgres://postgres@127.0.0.1:5432/ferretdb") instead
	// of SQLite files in Dir, which is then not used. The PostgreSQL
	// backend takes row locks and keeps answering under many clients that
	// are killed mid-query, which the SQLite backend does not.
	PostgreSQLURL string
	// SerializeWrites puts a proxy on Addr that lets conflicting writes
	// through to FerretDB (which then listens on a port of its own) one at
	// a time, so that conditional writes are atomic across clients as on
	// MongoDB. Several processes sharing one FerretDB need it; see
	// writeSerializer.
	SerializeWrites bool
	// Stats, if set (with SerializeWrites), receives every StatsEvery a
	// report of the commands the proxy forwarded, grouped by shape, the
	// costliest first: what a slow FerretDB spends its time on.
	Stats      io.Writer
	StatsEvery time.Duration
	// Faults, if set (with SerializeWrites), cuts the write commands it
	// is armed for and holds the commands it is told to hold.
	Faults *Faults
}

// Start runs FerretDB with its SQLite files in dir on a free port of
// 127.0.0.1. See StartConfig.
func Start(ctx context.Context, dir string) (uri string, stop func(), err error) {
	return StartConfig(ctx, Config{Dir: dir})
}

// StartConfig runs an embedded FerretDB v1 until ctx is cancelled or stop is
// called, and returns its URI (path "/", no database). stop waits until the
// listener and the SQLite files are closed; FerretDB gives open client
// connections up to 3 s to finish first, so stopping under connected clients
// takes that long. stop is safe to call twice.
func StartConfig(ctx context.Context, cfg Config) (uri string, stop func(), err error) {
	fcfg := ferretdb.Config{Handler: "postgresql", PostgreSQLURL: cfg.PostgreSQLURL}
	where := cfg.PostgreSQLURL
	if cfg.PostgreSQLURL == "" {
		if cfg.Dir == "" {
			return "", nil, errors.New("mongotest: Config.Dir or Config.PostgreSQLURL is required")
		}
		dir, err := filepath.Abs(cfg.Dir)
		if err != nil {
			return "", nil, fmt.Errorf("mongotest: data dir: %w", err)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", nil, fmt.Errorf("mongotest: data dir: %w", err)
		}
		fcfg = ferretdb.Config{Handler: "sqlite", SQLiteURL: "file:" + dir + "/"}
		where = dir
	}
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}

	newMu.Lock()
	addr := cfg.Addr
	if cfg.SerializeWrites {
		addr = "127.0.0.1:0" // FerretDB's own; clients use the proxy on cfg.Addr
	}
	fcfg.Listener = ferretdb.ListenerConfig{TCP: addr}
	fcfg.Logger = cfg.Logger
	f, err := ferretdb.New(&fcfg)
	newMu.Unlock()
	if err != nil {
		return "", nil, fmt.Errorf("mongotest: start FerretDB on %s: %w", where, err)
	}

	// Run closes the listener and the backend when its context ends; the
	// caller's ctx is only a parent so that stop can end it early.
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = f.Run(runCtx)
	}()
	go func() {
		select {
		case <-ctx.Done():
			cancel()
		case <-done:
		}
	}()

	// The listener is bound in New, so the address is known at once.
	uri = f.MongoDBURI()
	var closeProxy func()
	if cfg.SerializeWrites {
		backend := strings.TrimSuffix(strings.TrimPrefix(uri, "mongodb://"), "/")
		ln, err := net.Listen("tcp", cfg.Addr)
		if err != nil {
			cancel()
			<-done
			return "", nil, fmt.Errorf("mongotest: listen on %s: %w", cfg.Addr, err)
		}
		ws := &writeSerializer{backend: backend, faults: cfg.Faults}
		statsDone := make(chan struct{})
		if cfg.Stats != nil && cfg.StatsEvery > 0 {
			ws.stats = &cmdStats{}
			go func() {
				tick := time.NewTicker(cfg.StatsEvery)
				defer tick.Stop()
				for {
					select {
					case <-statsDone:
						return
					case <-tick.C:
						ws.stats.report(cfg.Stats, cfg.StatsEvery, 15)
					}
				}
			}()
		}
		go ws.serve(ln)
		closeProxy = func() { close(statsDone); _ = ln.Close(); ws.closeAll() }
		uri = "mongodb://" + ln.Addr().String() + "/"
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			if closeProxy != nil {
				closeProxy()
			}
			cancel()
			<-done
		})
	}
	return uri, stop, nil
}

// logRing keeps the last lines FerretDB logged so that a failing test can
// show them; passing tests print nothing.
type logRing struct {
	mu    sync.Mutex
	max   int
	next  uint64 // sequence number of the next line
	lines []string
}

func newLogRing(max int) *logRing { return &logRing{max: max} }

func (r *logRing) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	// FerretDB logs every error reply at warning level, as a header line and
	// a message line. The driver's endSessions at disconnect (a command
	// FerretDB v1 lacks) fails on every client, so those and the headers are
	// noise.
	rec := string(p)
	if strings.Contains(rec, "endSessions") || strings.Contains(rec, "Response header:") {
		return len(p), nil
	}
	for _, line := range strings.Split(strings.TrimRight(rec, "\n"), "\n") {
		r.lines = append(r.lines, line)
		r.next++
	}
	if over := len(r.lines) - r.max; over > 0 {
		r.lines = append(r.lines[:0:0], r.lines[over:]...)
	}
	return len(p), nil
}

func (r *logRing) mark() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.next
}

// since returns the kept lines written after mark.
func (r *logRing) since(mark uint64) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	first := r.next - uint64(len(r.lines)) // sequence number of lines[0]
	if mark < first {
		mark = first
	}
	return append([]string(nil), r.lines[mark-first:]...)
}
