package idemctl

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/99designs/gqlgen/graphql"

	"github.com/goovo/idem"
	"github.com/goovo/idem/idembackend"
	"github.com/goovo/idem/internal/store"
)

// Exit codes of Command.Run.
const (
	// ExitOK: the command did what was asked.
	ExitOK = 0
	// ExitFailure: the command ran and failed: nothing was found, the
	// database cannot be reached or failed, the sweep was interrupted.
	ExitFailure = 1
	// ExitUsage: the command line is wrong: an unknown command or flag, a
	// missing or malformed argument.
	ExitUsage = 2
)

// pingTimeout bounds the first statement, which checks that the database
// can be reached before a command runs.
const pingTimeout = 15 * time.Second

// Command is the command line over an Admin: the program's name, a base
// configuration (the server's idem.Config), the application's GraphQL
// schema, flags of the application's own, and a database opened only once
// the flags are parsed and a command needs it. Run runs it.
type Command struct {
	// Name is the program's name in messages and usage. Default "idemctl".
	Name string
	// Config is the base configuration of the hook the Admin is made of:
	// Backend (unless Open is set), and the defaults of Retention,
	// TombstoneHorizon and Lease, which the global flags override. Clock and
	// Logger are passed on as they are.
	Config idem.Config
	// Flags, when set, adds the application's own global flags (a -db
	// flag, say); they are parsed with the others, before the command.
	Flags func(fs *flag.FlagSet)
	// Open, when set, returns the backend after the flags were parsed,
	// when a command needs the database. Its error is reported as a runtime
	// failure. The caller closes what it opened after Run returns.
	Open func(ctx context.Context) (idembackend.Backend, error)
	// Schema, when set, is the application's GraphQL schema
	// (graph.NewExecutableSchema(…)): the sweep then archives the records
	// of a mutation with a shorter @idempotent(retentionSeconds:) once that
	// retention has passed, and inspect states each record's own window.
	// Without it the command knows no mutation's retention, and archives
	// every record by its entity's, the upper bound of its mutations'.
	Schema graphql.ExecutableSchema
}

// usageError is a mistake on the command line.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// failure is a runtime failure whose message is already written for people.
type failure struct{ msg string }

func (e failure) Error() string { return e.msg }

// env is what a command runs with.
type env struct {
	name           string
	admin          *Admin
	cfg            idem.Config
	backend        idembackend.Backend
	json           bool
	stdout, stderr io.Writer
}

// now is the database's time as the admin sees it: the machine's clock
// moved by Config.Clock. It only annotates output ("3m ago").
func (e *env) now() time.Time { return time.Now().Add(e.cfg.Clock.Offset()).UTC() }

// emit writes v as one JSON document, or calls text.
func (e *env) emit(v any, text func(w io.Writer)) error {
	if !e.json {
		text(e.stdout)
		return nil
	}
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// subcommand is one of the commands.
type subcommand struct {
	name, args, summary string
	// flags defines the command's flags and returns, for once they are
	// parsed, the function that checks them (usage errors, before any
	// database work; nil when there is nothing to check) and the function
	// that runs the command.
	flags func(fs *flag.FlagSet, e *env) (check func() error, run func(ctx context.Context) error)
}

func subcommands() []*subcommand {
	return []*subcommand{inspectCmd, stuckCmd, failedCmd, recoveredCmd, statsCmd, outboxCmd, sweepCmd}
}

func names() string {
	var ns []string
	for _, s := range subcommands() {
		ns = append(ns, s.name)
	}
	return strings.Join(ns, ", ")
}

// Run runs the command line args (without the program name), writes
// results to stdout and messages to stderr, and returns the exit code.
func (c Command) Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	name := c.Name
	if name == "" {
		name = "idemctl"
	}
	e := &env{name: name, cfg: c.Config, stdout: stdout, stderr: stderr}
	fail := func(code int, prefix string, err error) int {
		fmt.Fprintf(stderr, "%s: %s\n", prefix, oneLine(err.Error()))
		return code
	}

	global := c.globalFlags(e)
	cfg := &e.cfg
	if err := global.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			globalUsage(stdout, name, global)
			return ExitOK
		}
		return fail(ExitUsage, name, fmt.Errorf("%v (see %s -h)", err, name))
	}
	rest := global.Args()
	if len(rest) == 0 {
		return fail(ExitUsage, name, fmt.Errorf("no command given: one of %s (see %s -h)", names(), name))
	}
	if rest[0] == "help" {
		if len(rest) == 1 {
			globalUsage(stdout, name, global)
			return ExitOK
		}
		rest = []string{rest[1], "-h"}
	}
	i := slices.IndexFunc(subcommands(), func(s *subcommand) bool { return s.name == rest[0] })
	if i < 0 {
		return fail(ExitUsage, name, fmt.Errorf("unknown command %q: one of %s (see %s -h)", rest[0], names(), name))
	}
	sub := subcommands()[i]
	prefix := name + " " + sub.name
	fs := flag.NewFlagSet(prefix, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	check, run := sub.flags(fs, e)
	fs.Usage = func() {}
	if err := fs.Parse(rest[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			commandUsage(stdout, name, sub, fs)
			return ExitOK
		}
		return fail(ExitUsage, prefix, fmt.Errorf("%v (see %s -h)", err, prefix))
	}
	if fs.NArg() > 0 {
		return fail(ExitUsage, prefix, fmt.Errorf("unexpected argument %q: every argument is a flag (see %s -h)", fs.Arg(0), prefix))
	}
	if check != nil {
		if err := check(); err != nil {
			return fail(ExitUsage, prefix, err)
		}
	}
	if err := checkDurations(cfg); err != nil {
		return fail(ExitUsage, name, err)
	}

	if code, err := c.makeAdmin(ctx, e); err != nil {
		return fail(code, name, err)
	}
	if err := run(ctx); err != nil {
		var u usageError
		if errors.As(err, &u) {
			return fail(ExitUsage, prefix, err)
		}
		return fail(ExitFailure, prefix, describe(err))
	}
	return ExitOK
}

// globalFlags defines the global flags on e's configuration, its defaults
// filled in, and the application's own (Command.Flags).
func (c Command) globalFlags(e *env) *flag.FlagSet {
	global := flag.NewFlagSet(e.name, flag.ContinueOnError)
	global.SetOutput(io.Discard)
	cfg := &e.cfg
	global.BoolVar(&e.json, "json", false, "write one JSON document to stdout instead of text")
	cfg.Retention = orDefault(cfg.Retention, idem.DefaultRetention)
	global.Var((*durationFlag)(&cfg.Retention), "retention",
		"how long a finished record's response stays replayable: a `duration` like 24h or 30d (the server's idem.Config.Retention)")
	cfg.TombstoneHorizon = orDefault(cfg.TombstoneHorizon, idem.DefaultTombstoneHorizon)
	global.Var((*durationFlag)(&cfg.TombstoneHorizon), "horizon",
		"how long after its completion a key is remembered at all: a `duration` (the server's idem.Config.TombstoneHorizon)")
	cfg.Lease = orDefault(cfg.Lease, idem.DefaultLease)
	global.Var((*durationFlag)(&cfg.Lease), "lease",
		"lease of a pending claim, a `duration` (the server's idem.Config.Lease); stuck's default -older is 3 leases")
	if c.Flags != nil {
		c.Flags(global)
	}
	global.Usage = func() {} // printed below, on stdout, for -h only
	return global
}

// makeAdmin opens the backend (Command.Open), makes the hook, reads the
// schema (Command.Schema) and pings the database: e's Admin, or the exit
// code and the error that stop the command.
func (c Command) makeAdmin(ctx context.Context, e *env) (int, error) {
	backend := e.cfg.Backend
	if c.Open != nil {
		b, err := c.Open(ctx)
		if err != nil {
			return ExitFailure, describe(err)
		}
		backend = b
	}
	if backend == nil {
		return ExitFailure, errors.New("no database: Command.Config.Backend or Command.Open is required")
	}
	e.cfg.Backend, e.backend = backend, backend
	hook, err := idem.New(e.cfg)
	if err != nil {
		// Every other field was checked above: what is left is a
		// combination of the flags with the application's schema.
		return ExitUsage, errors.New(strings.TrimPrefix(err.Error(), "idem: "))
	}
	if c.Schema != nil {
		if err := hook.ReadSchema(c.Schema); err != nil {
			return ExitUsage, errors.New(strings.TrimPrefix(err.Error(), "idem: "))
		}
	}
	admin := New(hook)
	e.admin = admin
	if err := ping(ctx, admin); err != nil {
		return ExitFailure, fmt.Errorf("cannot reach the database: %w", describe(err))
	}
	return ExitOK, nil
}

// durationFlag is a flag.Value for durations that also accepts days: 30d,
// 1d12h, as well as everything time.ParseDuration accepts (90s, 24h).
type durationFlag time.Duration

// String implements flag.Value.
func (d *durationFlag) String() string {
	if d == nil {
		return "0s"
	}
	return formatDuration(time.Duration(*d))
}

// Set implements flag.Value.
func (d *durationFlag) Set(s string) error {
	v, err := parseDuration(s)
	if err != nil {
		return err
	}
	*d = durationFlag(v)
	return nil
}

func parseDuration(s string) (time.Duration, error) {
	days, rest, found := strings.Cut(s, "d")
	if !found {
		return time.ParseDuration(s)
	}
	n, err := strconv.ParseUint(days, 10, 16)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration (like 90s, 24h, 30d or 1d12h)", s)
	}
	d := time.Duration(n) * 24 * time.Hour
	if rest != "" {
		r, err := time.ParseDuration(rest)
		if err != nil || r < 0 {
			return 0, fmt.Errorf("%q is not a duration (like 90s, 24h, 30d or 1d12h)", s)
		}
		d += r
	}
	return d, nil
}

// formatDuration writes d exactly, with days from two days up: 30d, 2d12h,
// 36h, 1m30s.
func formatDuration(d time.Duration) string {
	if d < 0 {
		return "-" + formatDuration(-d)
	}
	day := 24 * time.Hour
	s := ""
	if d >= 2*day {
		s = strconv.FormatInt(int64(d/day), 10) + "d"
		d %= day
		if d == 0 {
			return s
		}
	}
	r := d.String()
	for _, zero := range []string{"m0s", "h0m"} {
		if strings.HasSuffix(r, zero) {
			r = strings.TrimSuffix(r, zero[1:])
		}
	}
	return s + r
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// checkDurations checks the global durations before idem.New does,
// with messages that name the flags.
func checkDurations(cfg *idem.Config) error {
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"-retention", cfg.Retention}, {"-horizon", cfg.TombstoneHorizon}, {"-lease", cfg.Lease}} {
		if f.d <= 0 {
			return fmt.Errorf("%s must be positive, not %v", f.name, f.d)
		}
	}
	if cfg.TombstoneHorizon <= cfg.Retention {
		return fmt.Errorf("-horizon (%s) must exceed -retention (%s)", human(cfg.TombstoneHorizon), human(cfg.Retention))
	}
	return nil
}

// ping runs one statement, so that an unreachable database is reported as
// such before a command starts.
func ping(ctx context.Context, admin *Admin) error {
	ctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	return admin.Ping(ctx)
}

// describe rewrites the database errors an operator meets into one line
// that says what is wrong.
func describe(err error) error {
	var f failure
	if errors.As(err, &f) {
		return err
	}
	if errors.Is(err, context.Canceled) {
		return failure{"interrupted"}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return failure{"timed out: " + oneLine(err.Error())}
	}
	// The store has read the driver's error: its kind, the database's own
	// message and, where the backend knows one, a hint.
	var se *store.Error
	if errors.As(err, &se) {
		msg := se.Backend + ": " + oneLine(se.Detail)
		switch {
		case errors.Is(err, store.ErrNoTable):
			return failure{msg + ": is this the application's database, and has it been migrated (start the server once)?"}
		case se.Hint != "":
			return failure{msg + ": " + se.Hint}
		case se.Kind != nil:
			return failure{msg}
		}
	}
	return failure{oneLine(err.Error())}
}

// oneLine joins the lines of a multi-line message (pgx lists every address
// it tried) and drops repeated ones.
func oneLine(s string) string {
	var parts []string
	for _, l := range strings.Split(s, "\n") {
		l = strings.TrimSpace(l)
		if l != "" && !slices.Contains(parts, l) {
			parts = append(parts, l)
		}
	}
	return strings.Join(parts, " ")
}

func globalUsage(w io.Writer, name string, fs *flag.FlagSet) {
	fmt.Fprintf(w, "Usage: %s [global flags] <command> [flags]\n\n", name)
	fmt.Fprintf(w, "Inspects and maintains the idempotency records of the application's database.\n\nCommands:\n")
	for _, s := range subcommands() {
		fmt.Fprintf(w, "  %-8s %s\n", s.name, s.summary)
	}
	fmt.Fprintf(w, "\nGlobal flags:\n")
	printDefaults(w, fs)
	fmt.Fprintf(w, "\n%s <command> -h describes a command and its flags.\n", name)
	fmt.Fprintf(w, "Exit codes: 0 done, 1 runtime failure (nothing found, database unreachable or failing, interrupted), 2 usage error.\n")
}

func commandUsage(w io.Writer, name string, s *subcommand, fs *flag.FlagSet) {
	fmt.Fprintf(w, "Usage: %s [global flags] %s %s\n\n%s.\n", name, s.name, s.args, upperFirst(s.summary))
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n > 0 {
		fmt.Fprintf(w, "\nFlags:\n")
		printDefaults(w, fs)
	}
	fmt.Fprintf(w, "\nGlobal flags (-json, -retention, -horizon, -lease) go before the command: see %s -h.\n", name)
}

func printDefaults(w io.Writer, fs *flag.FlagSet) {
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
