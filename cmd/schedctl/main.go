// Command schedctl is the command-line client of the schedulerd REST API:
// tenants and API keys (admin key), policies, schedules, fires, events and
// the tenant's summary (tenant key). It is built on the generated client
// package and prints tables, or the API's JSON with --json.
//
// Configuration: --url and --key, or SCHEDULER_URL and SCHEDULER_KEY.
// Exit status: 0 on success, 1 when the API or the connection fails, 2 on
// a usage error.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/schedulerd/schedulerd/client"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv))
}

// Exit statuses.
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

// errUsage marks an error of the command line; its message has been printed
// with the command's usage.
var errUsage = errors.New("usage")

// env carries what a command needs: the parsed common flags, the API
// client and the output streams.
type env struct {
	ctx    context.Context
	stdin  io.Reader
	out    io.Writer
	errOut io.Writer
	getenv func(string) string

	url, key string
	json     bool
	timeout  time.Duration
	api      *client.Client
}

// command is one "group verb" of the CLI.
type command struct {
	group, verb string
	args        string // positional arguments, for the usage line
	summary     string
	// flags declares the command's own flags; nil for none.
	flags func(fs *flag.FlagSet) func(e *env, args []string) error
	// positional is the exact number of positional arguments; -1: any.
	positional int
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	cmds := commands()
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr, cmds)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	group := args[0]
	var verbs []*command
	for _, c := range cmds {
		if c.group == group {
			verbs = append(verbs, c)
		}
	}
	if len(verbs) == 0 {
		fmt.Fprintf(stderr, "schedctl: unknown command %q\n\n", group)
		usage(stderr, cmds)
		return exitUsage
	}
	var cmd *command
	rest := args[1:]
	if len(verbs) == 1 && verbs[0].verb == "" {
		cmd = verbs[0]
	} else {
		if len(rest) == 0 || rest[0] == "-h" || rest[0] == "--help" {
			groupUsage(stderr, group, verbs)
			if len(rest) == 0 {
				return exitUsage
			}
			return exitOK
		}
		for _, c := range verbs {
			if c.verb == rest[0] {
				cmd = c
			}
		}
		if cmd == nil {
			fmt.Fprintf(stderr, "schedctl %s: unknown command %q\n\n", group, rest[0])
			groupUsage(stderr, group, verbs)
			return exitUsage
		}
		rest = rest[1:]
	}

	e := &env{ctx: ctx, stdin: stdin, out: stdout, errOut: stderr, getenv: getenv}
	name := strings.TrimSpace("schedctl " + cmd.group + " " + cmd.verb)
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&e.url, "url", "", "API base URL (default $SCHEDULER_URL, else http://127.0.0.1:8080)")
	fs.StringVar(&e.key, "key", "", "API key: the admin key for tenants and keys, else a tenant key (default $SCHEDULER_KEY)")
	fs.BoolVar(&e.json, "json", false, "print the API's JSON instead of a table")
	fs.DurationVar(&e.timeout, "timeout", 30*time.Second, "timeout of each request")
	do := func(*env, []string) error { return nil }
	if cmd.flags != nil {
		do = cmd.flags(fs)
	}
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: %s %s[flags]\n\n%s\n\nflags:\n", name, argsUsage(cmd.args), cmd.summary)
		printFlags(stderr, fs)
	}
	pos, err := parseInterleaved(fs, rest)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		return exitUsage
	}
	if cmd.positional >= 0 && len(pos) != cmd.positional {
		fmt.Fprintf(stderr, "%s: want %d argument(s) (%s), got %d\n\n", name, cmd.positional, cmd.args, len(pos))
		fs.Usage()
		return exitUsage
	}
	for _, a := range pos {
		if a == "" {
			fmt.Fprintf(stderr, "%s: empty argument\n\n", name)
			fs.Usage()
			return exitUsage
		}
	}
	if err := e.connect(); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return exitUsage
	}
	switch err := do(e, pos); {
	case err == nil:
		return exitOK
	case errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "%s: %v\n\n", name, strings.TrimSuffix(err.Error(), ": "+errUsage.Error()))
		fs.Usage()
		return exitUsage
	default:
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return exitFail
	}
}

// printFlags is flag.PrintDefaults with the spelling the documentation
// uses: --name for long flags, -f for one-letter ones.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		dash := "--"
		if len(f.Name) == 1 {
			dash = "-"
		}
		kind, usage := flag.UnquoteUsage(f)
		line := "  " + dash + f.Name
		if kind != "" {
			line += " " + kind
		}
		line += "\n    \t" + strings.ReplaceAll(usage, "\n", "\n    \t")
		if d := f.DefValue; d != "" && d != "0" && d != "false" {
			line += fmt.Sprintf(" (default %s)", d)
		}
		fmt.Fprintln(w, line)
	})
}

func argsUsage(a string) string {
	if a == "" {
		return ""
	}
	return a + " "
}

// parseInterleaved parses flags that may come before or after positional
// arguments ("schedules get ID --json"); "--" ends the flags.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// connect builds the API client from the flags and the environment.
func (e *env) connect() error {
	if e.url == "" {
		e.url = e.getenv("SCHEDULER_URL")
	}
	if e.url == "" {
		e.url = "http://127.0.0.1:8080"
	}
	if e.key == "" {
		e.key = e.getenv("SCHEDULER_KEY")
	}
	if e.key == "" {
		return errors.New("no API key: give --key or set SCHEDULER_KEY (the admin key for tenants and keys, else a tenant key)")
	}
	key := e.key
	c, err := client.NewClient(strings.TrimRight(e.url, "/"),
		client.WithHTTPClient(&http.Client{Timeout: e.timeout}),
		client.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
			if key != "" {
				r.Header.Set("Authorization", "Bearer "+key)
			}
			r.Header.Set("User-Agent", "schedctl")
			return nil
		}))
	if err != nil {
		return fmt.Errorf("--url %q: %w", e.url, err)
	}
	e.api = c
	return nil
}

// apiError is a problem+json answer of the API.
type apiError struct {
	status int
	p      client.Problem
}

func (a *apiError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d %s", a.status, a.p.Title)
	var fields []string
	if a.p.Errors != nil {
		for _, f := range *a.p.Errors {
			fields = append(fields, f.Field+": "+f.Reason)
		}
	}
	// The detail of a validation error is often the fields' list itself.
	if d := a.p.Detail; d != nil && *d != "" && *d != strings.Join(fields, "; ") && !strings.HasSuffix(*d, ": "+strings.Join(fields, "; ")) {
		b.WriteString(": " + *d)
	}
	for _, f := range fields {
		b.WriteString("\n  " + f)
	}
	return b.String()
}

// call finishes a request: it returns the body of a 2xx answer, else the
// API's problem as an error.
func call(resp *http.Response, err error) ([]byte, error) {
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("read the answer: %w", err)
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return body, nil
	}
	ae := &apiError{status: resp.StatusCode}
	if json.Unmarshal(body, &ae.p) != nil || ae.p.Title == "" {
		ae.p.Title = http.StatusText(resp.StatusCode)
		if s := strings.TrimSpace(string(body)); s != "" {
			ae.p.Detail = &s
		}
	}
	return nil, ae
}

// show prints the answer body as indented JSON (--json), or decodes it into
// v and hands it to table.
func show[T any](e *env, body []byte, table func(w *tabwriter.Writer, v *T)) error {
	if e.json {
		var buf bytes.Buffer
		if len(body) == 0 {
			body = []byte("{}")
		}
		if err := json.Indent(&buf, body, "", "  "); err != nil {
			return fmt.Errorf("the answer is not JSON: %w", err)
		}
		buf.WriteByte('\n')
		_, err := e.out.Write(buf.Bytes())
		return err
	}
	var v T
	if err := json.Unmarshal(body, &v); err != nil {
		return fmt.Errorf("decode the answer: %w", err)
	}
	w := tabwriter.NewWriter(e.out, 0, 4, 2, ' ', 0)
	table(w, &v)
	return w.Flush()
}

// fetch is call then show.
func fetch[T any](e *env, table func(w *tabwriter.Writer, v *T)) func(*http.Response, error) error {
	return func(resp *http.Response, err error) error {
		body, err := call(resp, err)
		if err != nil {
			return err
		}
		return show(e, body, table)
	}
}

func usage(w io.Writer, cmds []*command) {
	fmt.Fprint(w, `schedctl is the command-line client of the schedulerd API.

usage: schedctl <command> [<verb>] [arguments] [flags]

commands:
`)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, c := range cmds {
		fmt.Fprintf(tw, "  %s\t%s\n", strings.TrimSpace(c.group+" "+c.verb+" "+c.args), c.summary)
	}
	_ = tw.Flush()
	fmt.Fprint(w, `
Every command takes --url (default $SCHEDULER_URL, else http://127.0.0.1:8080),
--key (default $SCHEDULER_KEY), --json (the API's JSON instead of a table)
and --timeout. tenants and keys need the admin key; the others a tenant key.
"schedctl <command> <verb> -h" shows a command's flags.

Exit status: 0 success, 1 the API answered an error (printed with the fields
it names) or could not be reached, 2 usage error.
`)
}

func groupUsage(w io.Writer, group string, cmds []*command) {
	fmt.Fprintf(w, "usage: schedctl %s <verb> [arguments] [flags]\n\nverbs:\n", group)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, c := range cmds {
		fmt.Fprintf(tw, "  %s\t%s\n", strings.TrimSpace(c.verb+" "+c.args), c.summary)
	}
	_ = tw.Flush()
}

// Table cell helpers.

func ts(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func tsp(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return ts(*t)
}

func sp(s *string) string {
	if s == nil || *s == "" {
		return "-"
	}
	return *s
}

func ip(n *int) string {
	if n == nil {
		return "-"
	}
	return fmt.Sprint(*n)
}

func next(w io.Writer, cursor *string) {
	if cursor != nil {
		fmt.Fprintf(w, "\nnext page: --cursor %s\n", *cursor)
	}
}
