// Command schedulerd runs the scheduler: the REST Schedule Master, the
// emitter and the event handler in one process. With no flags it keeps its
// data in ./data (embedded store) and listens on 127.0.0.1:8080.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/schedulerd/schedulerd/app"
	"github.com/schedulerd/schedulerd/internal/fdlimit"
	"github.com/schedulerd/schedulerd/internal/logkey"
)

func main() {
	if err := run(os.Args[1:], os.Getenv, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "schedulerd:", err)
		os.Exit(1)
	}
}

func run(args []string, getenv func(string) string, logOut io.Writer) error {
	return runWithBanner(context.Background(), args, getenv, logOut, os.Stdout, app.Hooks{})
}

// version is set at build time with -ldflags "-X main.version=v1.2.3";
// empty, the module version recorded in the binary is used.
var version string

func versionString() string {
	if version != "" {
		return version
	}
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" {
		return info.Main.Version
	}
	return "(devel)"
}

// runWithBanner runs schedulerd until SIGINT, SIGTERM or the end of ctx;
// hooks are for tests.
func runWithBanner(ctx context.Context, args []string, getenv func(string) string, logOut, banner io.Writer, hooks app.Hooks) error {
	if slices.Contains(args, "--version") || slices.Contains(args, "-version") {
		_, err := fmt.Fprintf(banner, "schedulerd %s\n", versionString())
		return err
	}
	if len(args) > 0 && args[0] == "mongo-indexes" {
		return mongoIndexes(args[1:], getenv, banner)
	}
	cfg, err := app.ParseConfig(args, getenv)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	log := newLogger(cfg, logOut)
	mem, restoreMem := app.ApplyMemorySettings(cfg.GCPercent, cfg.MemoryLimitPercent, getenv, os.DirFS("/"))
	defer restoreMem()
	memLog := log.Info().Int("gcPercent", mem.GCPercent)
	if mem.Limit != math.MaxInt64 {
		memLog = memLog.Int64("memoryLimitBytes", mem.Limit)
	}
	if mem.LimitOf != "" {
		memLog = memLog.Str("memoryLimitOf", mem.LimitOf).Int64("memoryLimitOfBytes", mem.Of)
	}
	memLog.Msg("go runtime memory settings")
	// Every API connection holds a file descriptor.
	if fds, err := fdlimit.Raise(); err != nil {
		log.Warn().Err(err).Uint64("openFilesLimit", fds.Soft).Msg("open-file limit not raised")
	} else {
		log.Info().Uint64("openFilesLimit", fds.Soft).Msg("open-file limit")
	}

	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	a, err := app.NewWithHooks(ctx, cfg, log, hooks)
	if err != nil {
		return err
	}
	if err := a.Start(context.WithoutCancel(ctx)); err != nil {
		_ = a.Shutdown(context.Background())
		return err
	}
	fmt.Fprintf(banner, "schedulerd listening on http://%s (store: %s)\n", a.Addr(), cfg.Store)
	if f := a.AdminKeyFile(); f != "" {
		fmt.Fprintf(banner, "admin API key: cat %s\n", f)
	}
	waitErr := a.Wait(ctx)
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	if err := a.Shutdown(sctx); err != nil {
		return err
	}
	return waitErr
}

func newLogger(cfg app.Config, out io.Writer) zerolog.Logger {
	level, _ := zerolog.ParseLevel(cfg.LogLevel)
	if cfg.LogFormat == "console" {
		out = zerolog.ConsoleWriter{Out: out, TimeFormat: time.RFC3339}
	}
	return zerolog.New(out).Level(level).With().Timestamp().Str(logkey.Instance, cfg.InstanceID).Logger()
}

// mongoIndexes is the mongo-indexes command: with the instances'
// configuration (flags or environment), it builds the MongoDB store's
// missing indexes and waits for them, for an operator to run before
// rolling out a version that adds indexes (see docs/operating.md).
func mongoIndexes(args []string, getenv func(string) string, out io.Writer) error {
	cfg, err := app.ParseConfig(args, getenv)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return app.BuildMongoIndexes(ctx, cfg, out)
}
