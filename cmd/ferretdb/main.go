// Command ferretdb runs an embedded FerretDB v1 as a process of its own, so
// that chaos tests can stop, kill and restart the MongoDB-protocol store of a
// schedulerd deployment independently of the scheduler. Its backend is SQLite
// files in -dir, or PostgreSQL with -postgresql-url:
//
//	ferretdb -listen 127.0.0.1:27018 -dir /tmp/ferret
//	ferretdb -listen 127.0.0.1:27018 -postgresql-url postgres://postgres@127.0.0.1:5432/ferretdb
//
// It prints one line, "ferretdb listening on mongodb://ADDR/", on stdout when
// it accepts connections, and runs until SIGINT or SIGTERM. Restarting it with
// the same -listen and -dir brings back the same data at the same URI.
//
// By default a proxy in front of FerretDB lets conflicting writes (to the same
// document, or naming no _id) through one at a time (-serialize-writes):
// FerretDB v1 runs a conditional write as a find and then a write by _id, so
// without it two processes' compare-and-sets on one document can both
// succeed, which MongoDB never allows.
//
// FerretDB v1 is a correctness stand-in for MongoDB; it is slow (no index use,
// about 150 ms per update under load), so never benchmark against it.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	_ "net/http/pprof" // served only with -pprof
	"os"
	"os/signal"
	"syscall"

	"github.com/schedulerd/schedulerd/store/mongo/mongotest"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "ferretdb:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("ferretdb", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:0", "TCP address to listen on (a fixed port lets a restarted server keep its URI)")
	dir := fs.String("dir", "", "directory of the SQLite files (reuse it to keep the data); required unless -postgresql-url is set")
	pgURL := fs.String("postgresql-url", "", "use FerretDB's PostgreSQL backend with this connection string instead of SQLite")
	level := fs.String("log-level", "warn", "log level: debug, info, warn or error")
	serialize := fs.Bool("serialize-writes", true, "let conflicting writes (same document, or naming no _id) through one at a time, so that conditional writes are atomic across clients as on MongoDB (FerretDB v1's are a find and then a write)")
	statsEvery := fs.Duration("stats-every", 0, "with -serialize-writes: print, at this interval, the commands forwarded grouped by shape (command, collection, filter fields) with their counts and latencies, costliest first; 0: off")
	pprofAddr := fs.String("pprof", "", "serve net/http/pprof on this address (for example 127.0.0.1:6060), to profile FerretDB under a test's load; empty: off")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if (*dir == "") == (*pgURL == "") {
		return fmt.Errorf("exactly one of -dir and -postgresql-url is required")
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*level)); err != nil {
		return fmt.Errorf("-log-level: %w", err)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lvl})).With("component", "ferretdb")

	if *pprofAddr != "" {
		ln, err := net.Listen("tcp", *pprofAddr)
		if err != nil {
			return fmt.Errorf("-pprof: %w", err)
		}
		// The default mux has net/http/pprof's handlers and nothing else.
		go func() { _ = http.Serve(ln, nil) }()
		fmt.Fprintf(stderr, "pprof on http://%s/debug/pprof/\n", ln.Addr())
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	uri, shutdown, err := mongotest.StartConfig(ctx, mongotest.Config{Dir: *dir, PostgreSQLURL: *pgURL, Addr: *listen, Logger: log, SerializeWrites: *serialize, Stats: stderr, StatsEvery: *statsEvery})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "ferretdb listening on %s\n", uri)
	<-ctx.Done()
	shutdown()
	return nil
}
