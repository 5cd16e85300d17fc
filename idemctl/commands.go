package idemctl

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/goovo/idem"
	"github.com/goovo/idem/idemcode"
	"github.com/goovo/idem/idemoutbox"
)

// DefaultLimit is how many records stuck and failed list per table.
const DefaultLimit = 50

// record is a record as inspect reports it: the Admin's view, and what a
// retry with the key gets now.
type record struct {
	RecordInfo
	// Retry says what a request with the key gets now.
	Retry string `json:"retry"`
}

type inspectOutput struct {
	Tenant  string   `json:"tenant"`
	Key     string   `json:"key"`
	Records []record `json:"records"`
}

var inspectCmd = &subcommand{
	name: "inspect", args: "-tenant T -key K",
	summary: "show every record of a key, in every record table and in the archive: state, operation, attempts, times, the stored response, and what a retry gets now",
	flags: func(fs *flag.FlagSet, e *env) (func() error, func(context.Context) error) {
		tenant := fs.String("tenant", "", "the tenant the key belongs to (required)")
		key := fs.String("key", "", "the idempotency key (required)")
		check := func() error {
			set := map[string]bool{}
			fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
			switch {
			case *tenant == "":
				return usagef("-tenant is required (see %s inspect -h)", e.name)
			case *key == "" && !set["key"]:
				return usagef("-key is required (see %s inspect -h)", e.name)
			}
			if err := idem.ValidateKey(*key); err != nil {
				var ie *idemcode.Error
				if errors.As(err, &ie) {
					return usagef("malformed -key: %s", ie.Message)
				}
				return usagef("malformed -key: %v", err)
			}
			return nil
		}
		run := func(ctx context.Context) error {
			infos, err := e.admin.Inspect(ctx, *tenant, *key)
			if err != nil {
				return err
			}
			out := inspectOutput{Tenant: *tenant, Key: *key, Records: []record{}}
			now := e.now()
			for _, ri := range infos {
				out.Records = append(out.Records, record{RecordInfo: ri, Retry: e.retry(ri, now)})
			}
			if e.json || len(out.Records) > 0 {
				if err := e.emit(out, func(w io.Writer) { e.printInspect(w, out, now) }); err != nil {
					return err
				}
			}
			if len(out.Records) == 0 {
				var tables []string
				for _, r := range e.backend.RecordTables() {
					tables = append(tables, r.Table)
				}
				where := strings.Join(tables, ", ")
				if a := e.backend.ArchiveTable(); a != "" {
					where += " or the archive (" + a + ")"
				}
				return failure{fmt.Sprintf("no record of key %q for tenant %q in %s", *key, *tenant, where)}
			}
			return nil
		}
		return check, run
	},
}

// retention is the retention window of an entity's records.
func (e *env) retention(entity string) time.Duration {
	if r, ok := e.backend.Records(entity); ok && r.Retention > 0 {
		return r.Retention
	}
	return e.cfg.Retention
}

// recordRetention is the retention window of ri: its mutation's, when
// the hook has read it from the schema (known), else its entity's, the
// upper bound of its mutation's.
func (e *env) recordRetention(ri RecordInfo) (d time.Duration, known bool) {
	for _, m := range e.admin.mutationRetentions(ri.Entity) {
		if m.Mutation == ri.Operation {
			return m.Retention, true
		}
	}
	_, read := e.admin.hook.MutationRetentions()
	return e.retention(ri.Entity), read
}

// retry says what a request with the record's key gets at now.
func (e *env) retry(ri RecordInfo, now time.Time) string {
	switch ri.State {
	case "pending":
		if ri.LeaseExpiresAt != nil && ri.LeaseExpiresAt.After(now) {
			return "IDEMPOTENCY_IN_PROGRESS until the lease runs out " + relative(*ri.LeaseExpiresAt, now) + ", then it takes the claim over"
		}
		return fmt.Sprintf("takes the claim over and runs the mutation again (attempt %d)", ri.Attempt+1)
	case "succeeded", "failed":
		if ri.CompletedAt == nil {
			return "replays the stored response"
		}
		retention, known := e.recordRetention(ri)
		until := ri.CompletedAt.Add(retention)
		if ri.LeaseExpiresAt != nil && ri.LeaseExpiresAt.After(until) {
			// The expiry its answer promised, longer than this
			// configuration's: kept (see TableSweep.Promised).
			until, known = *ri.LeaseExpiresAt, true
		}
		if until.After(now) {
			if !known {
				// A mutation's @idempotent(retentionSeconds:), in a GraphQL
				// schema this hook has not read, may end it sooner.
				return "replays the stored response until " + stamp(&until) + " at the latest (its mutation's retentionSeconds, if any, ends it sooner)"
			}
			return "replays the stored response until " + stamp(&until)
		}
		return "IDEMPOTENCY_KEY_EXPIRED (past retention since " + stamp(&until) + "; the next sweep archives the response)"
	case "tombstone":
		msg := "IDEMPOTENCY_KEY_EXPIRED; the mutation never runs again"
		if ri.ArchivedAt != nil {
			forget := ri.ArchivedAt.Add(e.cfg.TombstoneHorizon)
			msg += " while the tombstone lasts (a sweep after " + stamp(&forget) + " purges it and forgets the key)"
		}
		return msg
	case "archived":
		return "nothing: an archived copy is history, never replayed"
	}
	return ""
}

func (e *env) printInspect(w io.Writer, out inspectOutput, now time.Time) {
	fmt.Fprintf(w, "tenant %q, key %q: %s\n", out.Tenant, out.Key, plural(int64(len(out.Records)), "record", "records"))
	for _, r := range out.Records {
		where := "table " + r.Table
		if r.State == "archived" {
			where = "archive " + e.backend.ArchiveTable() + ", from " + r.Table
		}
		fmt.Fprintf(w, "\n%s (%s): %s\n", r.Entity, where, r.State)
		t := newTable(w, "  operation", orDash(r.Operation))
		t.row("  attempts", strconv.Itoa(r.Attempt))
		t.row("  claimed", stampAgo(r.ClaimedAt, now))
		if r.State == "pending" {
			t.row("  lease until", stampAgo(r.LeaseExpiresAt, now))
		}
		t.row("  completed", stampAgo(r.CompletedAt, now))
		if r.State == "succeeded" || r.State == "failed" {
			by := "its client"
			if r.Recovered {
				by = "the recoverer (idem.Config.RecoverAfter), not its client"
			}
			t.row("  finished by", by)
		}
		if r.ArchivedAt != nil {
			t.row("  archived", stampAgo(r.ArchivedAt, now))
		}
		switch {
		case len(r.Data) > 0:
			t.row("  data", string(r.Data))
		case r.State == "tombstone":
			t.row("  data", "(in the archive)")
		default:
			t.row("  data", "-")
		}
		if len(r.Errors) == 0 {
			t.row("  errors", "-")
		}
		for i, ge := range r.Errors {
			label := ""
			if i == 0 {
				label = "  errors"
			}
			t.row(label, describeGQLError(ge.Message, ge.Path.String(), ge.Extensions))
		}
		t.row("  a retry gets", r.Retry)
		t.flush()
	}
}

func describeGQLError(msg, path string, ext map[string]any) string {
	s := msg
	if code, ok := ext["code"].(string); ok && code != "" {
		s += " [" + code + "]"
	}
	if path != "" {
		s += " at " + path
	}
	return s
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

type listOutput struct {
	OlderThan string       `json:"olderThan,omitempty"`
	Limit     int          `json:"limitPerTable"`
	Records   []RecordInfo `json:"records"`
	// Truncated names the tables that have more records than Limit.
	Truncated []string `json:"truncated,omitempty"`
}

// truncate keeps at most limit records of each table of infos, which were
// read with a limit of limit+1, and returns the tables that had more.
func truncate(infos []RecordInfo, limit int) (kept []RecordInfo, truncated []string) {
	n := map[string]int{}
	for _, r := range infos {
		if n[r.Table]++; n[r.Table] > limit {
			if n[r.Table] == limit+1 {
				truncated = append(truncated, r.Table)
			}
			continue
		}
		kept = append(kept, r)
	}
	return kept, truncated
}

// printTruncated says which tables a listing cut short, and how to see
// the rest.
func printTruncated(w io.Writer, truncated []string, limit int) {
	if len(truncated) == 0 {
		return
	}
	fmt.Fprintf(w, "\nTruncated: %s %s more than %d; see the rest with a larger -limit (-limit %d).\n",
		strings.Join(truncated, ", "), map[bool]string{true: "has", false: "have"}[len(truncated) == 1], limit, limit*10)
}

func limitFlag(fs *flag.FlagSet) *int {
	return fs.Int("limit", DefaultLimit, "list at most this many records per table")
}

func checkLimit(limit int) error {
	if limit <= 0 {
		return usagef("-limit must be positive, not %d", limit)
	}
	return nil
}

var stuckCmd = &subcommand{
	name: "stuck", args: "[-older D] [-limit N]",
	summary: "list pending claims whose lease ran out long ago, oldest first: their worker died and no retry came to take them over",
	flags: func(fs *flag.FlagSet, e *env) (func() error, func(context.Context) error) {
		olderV := durationFlag(stuckAfter * e.cfg.Lease)
		fs.Var(&olderV, "older", fmt.Sprintf("list claims whose lease ran out more than this `duration` ago (by default %d × -lease)", stuckAfter))
		older := (*time.Duration)(&olderV)
		limit := limitFlag(fs)
		check := func() error {
			if *older < 0 {
				return usagef("-older must not be negative, not %v", *older)
			}
			return checkLimit(*limit)
		}
		run := func(ctx context.Context) error {
			infos, err := e.admin.Stuck(ctx, *older, *limit+1)
			if err != nil {
				return err
			}
			infos, truncated := truncate(infos, *limit)
			out := listOutput{OlderThan: formatDuration(*older), Limit: *limit, Records: orEmpty(infos), Truncated: truncated}
			now := e.now()
			return e.emit(out, func(w io.Writer) {
				if len(infos) == 0 {
					fmt.Fprintf(w, "No stuck claims: no pending record's lease ran out more than %s ago.\n", human(*older))
					return
				}
				fmt.Fprintf(w, "%s whose lease ran out more than %s ago (at most %d per table):\n\n",
					plural(int64(len(infos)), "pending claim", "pending claims"), human(*older), *limit)
				t := newTable(w, "ENTITY", "TENANT", "KEY", "OPERATION", "ATTEMPT", "CLAIMED", "LEASE RAN OUT", "FINISHED BY")
				for _, r := range infos {
					by := "its client"
					if r.Recoverable {
						by = "the recoverer"
					}
					t.row(r.Entity, r.Tenant, strconv.Quote(r.Key), orDash(r.Operation), strconv.Itoa(r.Attempt), stamp(r.ClaimedAt), stampAgo(r.LeaseExpiresAt, now), by)
				}
				t.flush()
				printTruncated(w, truncated, *limit)
				fmt.Fprintf(w, "\nThe next request with such a key takes the claim over and runs the mutation again; so does, by itself, a server with\n"+
					"-recover-after (idem.Config.RecoverAfter) for a claim finished by the recoverer. A claim still pending a retention window after\n"+
					"it was made is stored as failed with IDEMPOTENCY_ABANDONED (see: %s failed).\n"+
					"See one with: %s inspect -tenant T -key K\n", e.name, e.name)
			})
		}
		return check, run
	},
}

var failedCmd = &subcommand{
	name: "failed", args: "[-tenant T] [-code C] [-since D] [-until D] [-limit N]",
	summary: "list records that hold a final error (idem.Final), newest first, within their retention window: retries replay the error",
	flags: func(fs *flag.FlagSet, e *env) (func() error, func(context.Context) error) {
		tenant := fs.String("tenant", "", "list only this tenant's records")
		code := fs.String("code", "", "list only records with an error of this `code` (extensions.code), e.g. IDEMPOTENCY_ABANDONED")
		var sinceV, untilV durationFlag
		fs.Var(&sinceV, "since", "list only records completed less than this `duration` ago")
		fs.Var(&untilV, "until", "list only records completed more than this `duration` ago")
		since, until := (*time.Duration)(&sinceV), (*time.Duration)(&untilV)
		limit := limitFlag(fs)
		check := func() error {
			if *since < 0 || *until < 0 {
				return usagef("-since and -until must not be negative")
			}
			if *since > 0 && *until >= *since {
				return usagef("-until (%v) must be shorter than -since (%v)", *until, *since)
			}
			return checkLimit(*limit)
		}
		run := func(ctx context.Context) error {
			now := e.now()
			opts := FailedOptions{Limit: *limit + 1, Tenant: *tenant, Code: *code}
			if *since > 0 {
				opts.Since = now.Add(-*since)
			}
			if *until > 0 {
				opts.Until = now.Add(-*until)
			}
			infos, complete, err := e.admin.Failed(ctx, opts)
			if err != nil {
				return err
			}
			infos, truncated := truncate(infos, *limit)
			out := failedOutput{listOutput: listOutput{Limit: *limit, Records: orEmpty(infos), Truncated: truncated},
				Tenant: *tenant, Code: *code, Complete: complete}
			if *since > 0 {
				out.Since = formatDuration(*since)
			}
			if *until > 0 {
				out.Until = formatDuration(*until)
			}
			return e.emit(out, func(w io.Writer) {
				if len(infos) == 0 {
					fmt.Fprintf(w, "No failed records%s.\n", out.filters())
				} else {
					fmt.Fprintf(w, "%s%s (at most %d per table, newest first):\n\n", plural(int64(len(infos)), "failed record", "failed records"), out.filters(), *limit)
					t := newTable(w, "ENTITY", "TENANT", "KEY", "OPERATION", "ATTEMPT", "COMPLETED", "ERROR")
					for _, r := range infos {
						msg := "-"
						if len(r.Errors) > 0 {
							msg = describeGQLError(r.Errors[0].Message, "", r.Errors[0].Extensions)
							if len(r.Errors) > 1 {
								msg += fmt.Sprintf(" (+%d more)", len(r.Errors)-1)
							}
						}
						t.row(r.Entity, r.Tenant, strconv.Quote(r.Key), orDash(r.Operation), strconv.Itoa(r.Attempt), stampAgo(r.CompletedAt, now), clip(msg, 80))
					}
					t.flush()
					printTruncated(w, truncated, *limit)
				}
				if !complete {
					fmt.Fprintf(w, "\nIncomplete: only the newest %d failed records of each table were read for -code; narrow them with -tenant, -since or -until to see older ones.\n", failedScan)
				}
			})
		}
		return check, run
	},
}

// failedOutput is failed's JSON: the list and the filters it was read with.
type failedOutput struct {
	listOutput
	Tenant string `json:"tenant,omitempty"`
	Code   string `json:"code,omitempty"`
	Since  string `json:"since,omitempty"`
	Until  string `json:"until,omitempty"`
	// Complete is false when -code read only the newest failedScan
	// records of a table.
	Complete bool `json:"complete"`
}

// filters says which records the listing kept, in words (" of tenant …").
func (o failedOutput) filters() string {
	var s string
	if o.Tenant != "" {
		s += " of tenant " + strconv.Quote(o.Tenant)
	}
	if o.Code != "" {
		s += " with code " + o.Code
	}
	switch {
	case o.Since != "" && o.Until != "":
		s += " completed between " + o.Since + " and " + o.Until + " ago"
	case o.Since != "":
		s += " completed in the last " + o.Since
	case o.Until != "":
		s += " completed more than " + o.Until + " ago"
	}
	return s
}

var recoveredCmd = &subcommand{
	name: "recovered", args: "[-table T] [-since D] [-limit N]",
	summary: "list records the recoverer finished (idem.Config.RecoverAfter) instead of their client, newest first, within their retention window",
	flags: func(fs *flag.FlagSet, e *env) (func() error, func(context.Context) error) {
		table := fs.String("table", "", "list only this entity or record table")
		sinceV := durationFlag(e.cfg.Retention)
		fs.Var(&sinceV, "since", "list records completed less than this `duration` ago (by default -retention)")
		since := (*time.Duration)(&sinceV)
		limit := limitFlag(fs)
		check := func() error {
			if *since <= 0 {
				return usagef("-since must be positive, not %v", *since)
			}
			return checkLimit(*limit)
		}
		run := func(ctx context.Context) error {
			now := e.now()
			infos, complete, err := e.admin.Recovered(ctx, *table, *since, *limit)
			if err != nil {
				return err
			}
			out := recoveredOutput{Since: formatDuration(*since), Limit: *limit, Complete: complete, Records: orEmpty(infos)}
			return e.emit(out, func(w io.Writer) {
				if len(infos) == 0 {
					fmt.Fprintf(w, "No records finished by the recoverer in the last %s.\n", human(*since))
				} else {
					fmt.Fprintf(w, "%s finished by the recoverer in the last %s (at most %d per table, newest first):\n\n",
						plural(int64(len(infos)), "record", "records"), human(*since), *limit)
					t := newTable(w, "ENTITY", "TENANT", "KEY", "OPERATION", "STATUS", "COMPLETED")
					for _, r := range infos {
						status := r.Status
						if code := errorCode(r); code != "" {
							status += " " + code
						}
						t.row(r.Entity, r.Tenant, strconv.Quote(r.Key), orDash(r.Operation), status, stampAgo(r.CompletedAt, now))
					}
					t.flush()
				}
				if len(infos) > 0 {
					_, truncated := truncate(infos, *limit-1)
					if len(truncated) > 0 {
						fmt.Fprintf(w, "\nA table may have more than %d such records: see the rest with a larger -limit (-limit %d).\n", *limit, *limit*10)
					}
				}
				if !complete {
					fmt.Fprintf(w, "\nIncomplete: only the newest %d finished records of each table were read, not the whole %s; use a shorter -since to see older ones.\n", recoveredScan, human(*since))
				}
			})
		}
		return check, run
	},
}

type recoveredOutput struct {
	Since string `json:"since"`
	Limit int    `json:"limitPerTable"`
	// Complete is false when older finished records were not read
	// (recoveredScan).
	Complete bool         `json:"complete"`
	Records  []RecordInfo `json:"records"`
}

// errorCode is the code of a failed record's first stored error.
func errorCode(r RecordInfo) string {
	if r.Status != "failed" || len(r.Errors) == 0 {
		return ""
	}
	code, _ := r.Errors[0].Extensions["code"].(string)
	return code
}

func orEmpty(infos []RecordInfo) []RecordInfo {
	if infos == nil {
		return []RecordInfo{}
	}
	return infos
}

var statsCmd = &subcommand{
	name: "stats", args: "",
	summary: "count the records of every entity by state, show the oldest pending claim and the archive's size",
	flags: func(fs *flag.FlagSet, e *env) (func() error, func(context.Context) error) {
		return nil, func(ctx context.Context) error {
			st, err := e.admin.Stats(ctx)
			if err != nil {
				return err
			}
			if st.Tables == nil {
				st.Tables = []TableStats{}
			}
			now := e.now()
			return e.emit(st, func(w io.Writer) {
				t := newTable(w, "ENTITY", "TABLE", "PENDING", "SUCCEEDED", "FAILED", "TOMBSTONES", "OLDEST PENDING")
				for _, ts := range st.Tables {
					t.row(ts.Entity, ts.Table, itoa(ts.Pending), itoa(ts.Succeeded), itoa(ts.Failed), itoa(ts.Tombstones), stampAgo(ts.OldestPending, now))
				}
				t.flush()
				if a := e.backend.ArchiveTable(); a != "" {
					fmt.Fprintf(w, "\nArchive (%s): %s, %s of responses.\n", a, plural(st.ArchivedRecords, "record", "records"), size(st.ArchiveBytes))
				} else {
					fmt.Fprintln(w, "\nNo archive table: add an idemschema.Archive entity to the ent schema.")
				}
				if r := st.Replication; r != nil && r.Synchronous {
					fmt.Fprintf(w, "\nReplication: synchronous (synchronous_commit %s, synchronous_standby_names %q, %d synchronous standbys streaming): a failover keeps every acknowledged answer.\n",
						r.SynchronousCommit, r.SynchronousStandbyNames, r.SynchronousStandbys)
				} else if r != nil {
					fmt.Fprintf(w, "\nReplication: NOT synchronous: %s.\n", r.Warning)
				}
			})
		}
	},
}

var outboxCmd = &subcommand{
	name: "outbox", args: "",
	summary: "count the outbox's River jobs per kind: how many wait (running, retrying), how old the oldest waiting one is, how many failed for good",
	flags: func(fs *flag.FlagSet, e *env) (func() error, func(context.Context) error) {
		return nil, func(ctx context.Context) error {
			st, err := idemoutbox.Stats(ctx, e.backend.DB(), e.backend.Dialect())
			if err != nil {
				return err
			}
			return e.emit(st, func(w io.Writer) {
				if len(st) == 0 {
					fmt.Fprintln(w, "No jobs.")
					return
				}
				t := newTable(w, "KIND", "WAITING", "RUNNING", "RETRYING", "FAILED", "COMPLETED", "OLDEST WAITING")
				for _, k := range st {
					oldest := "-"
					if k.Waiting > 0 {
						oldest = formatDuration(k.OldestWaiting.Round(time.Second)) + " ago"
					}
					t.row(k.Kind, itoa(k.Waiting), itoa(k.Running), itoa(k.Retrying), itoa(k.Failed), itoa(k.Completed), oldest)
				}
				t.flush()
			})
		}
	},
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// sweepOutput is what sweep reports.
type sweepOutput struct {
	DryRun bool         `json:"dryRun"`
	Tables []TableSweep `json:"tables"`
	// Archived and Purged sum the tables (in a dry run: what a sweep
	// would do).
	Archived         int     `json:"archived"`
	Purged           int     `json:"purged"`
	Elapsed          string  `json:"elapsed"`
	ElapsedSeconds   float64 `json:"elapsedSeconds"`
	RecordsPerSecond float64 `json:"recordsPerSecond"`
	// Complete is false when the sweep stopped early (interrupted, or the
	// database failed): the counts are what it did until then.
	Complete bool `json:"complete"`
}

// progressEvery is how often a long sweep reports its progress on stderr.
const progressEvery = time.Second

var sweepCmd = &subcommand{
	name: "sweep", args: "[-dry-run] [-batch N] [-pause D]",
	summary: "archive the responses of records past their retention window (leaving tombstones) and purge tombstones past the horizon, in short batches; safe to interrupt and to run beside other sweepers",
	flags: func(fs *flag.FlagSet, e *env) (func() error, func(context.Context) error) {
		dry := fs.Bool("dry-run", false, "count what a sweep would archive and purge, and change nothing")
		batch := fs.Int("batch", DefaultSweepBatch, "records per transaction: a batch's locks last one transaction")
		var pauseV durationFlag
		fs.Var(&pauseV, "pause", "pause between batches, a `duration`, to yield to live traffic")
		pause := (*time.Duration)(&pauseV)
		check := func() error {
			if *batch <= 0 {
				return usagef("-batch must be positive, not %d", *batch)
			}
			if *pause < 0 {
				return usagef("-pause must not be negative, not %v", *pause)
			}
			return nil
		}
		run := func(ctx context.Context) error {
			p := &progress{e: e, start: time.Now(), last: time.Now()}
			report, err := e.admin.Sweep(ctx, SweepOptions{BatchSize: *batch, Pause: *pause, DryRun: *dry, Progress: p.update})
			out := sweepOutput{DryRun: report.DryRun, Tables: report.Tables, Complete: err == nil}
			elapsed := report.Elapsed
			if err != nil {
				out.Tables = p.tables(report.Tables)
				elapsed = time.Since(p.start)
			}
			if out.Tables == nil {
				out.Tables = []TableSweep{}
			}
			for _, t := range out.Tables {
				out.Archived += t.Archived
				out.Purged += t.Purged
			}
			out.Elapsed, out.ElapsedSeconds = human(elapsed), elapsed.Seconds()
			if !*dry {
				out.RecordsPerSecond = rate(out.Archived+out.Purged, elapsed)
			}
			p.done()
			if perr := e.emit(out, func(w io.Writer) { e.printSweep(w, out) }); perr != nil && err == nil {
				err = perr
			}
			if err != nil {
				what := "interrupted"
				if !errors.Is(err, context.Canceled) {
					what = "failed (" + describe(err).Error() + ")"
				}
				return failure{fmt.Sprintf("%s after archiving %d and purging %d records; nothing is lost or half-moved: run sweep again to continue", what, out.Archived, out.Purged)}
			}
			return nil
		}
		return check, run
	},
}

func (e *env) printSweep(w io.Writer, out sweepOutput) {
	archived, purged := "ARCHIVED", "PURGED"
	if out.DryRun {
		fmt.Fprintf(w, "Dry run: nothing changed.\n\n")
		archived, purged = "TO ARCHIVE", "TO PURGE"
	}
	t := newTable(w, "ENTITY", "TABLE", archived, purged)
	for _, ts := range out.Tables {
		t.row(ts.Entity, ts.Table, strconv.Itoa(ts.Archived), strconv.Itoa(ts.Purged))
	}
	t.flush()
	fmt.Fprintln(w)
	window := fmt.Sprintf("(retention %s, horizon %s)", human(e.cfg.Retention), human(e.cfg.TombstoneHorizon))
	switch {
	case out.DryRun:
		fmt.Fprintf(w, "A sweep would archive %s and purge %s %s.\n",
			plural(int64(out.Archived), "response", "responses"), plural(int64(out.Purged), "tombstone", "tombstones"), window)
	case !out.Complete:
		fmt.Fprintf(w, "Stopped early: %s archived, %s purged in %s.\n",
			plural(int64(out.Archived), "response", "responses"), plural(int64(out.Purged), "tombstone", "tombstones"), out.Elapsed)
	default:
		fmt.Fprintf(w, "%s archived, %s purged in %s (%.0f records/s) %s.\n",
			plural(int64(out.Archived), "response", "responses"), plural(int64(out.Purged), "tombstone", "tombstones"),
			out.Elapsed, out.RecordsPerSecond, window)
	}
	var promised int
	var until time.Time
	for _, ts := range out.Tables {
		promised += ts.Promised
		if ts.PromisedUntil.After(until) {
			until = ts.PromisedUntil
		}
	}
	if promised > 0 {
		fmt.Fprintf(w, "Kept %s past this idemctl's retention (%s): their answers promised them until %s; the retention that answered them is longer than -retention.\n",
			plural(int64(promised), "response", "responses"), human(e.cfg.Retention), stamp(&until))
	}
}

// progress follows a sweep: per-table counts (the last report of each
// table), and a line on stderr every progressEvery once the sweep has run
// that long.
type progress struct {
	e       *env
	start   time.Time
	last    time.Time
	order   []string
	counts  map[string]SweepProgress
	printed bool
}

func (p *progress) update(sp SweepProgress) {
	if p.counts == nil {
		p.counts = map[string]SweepProgress{}
	}
	if _, ok := p.counts[sp.Entity]; !ok {
		p.order = append(p.order, sp.Entity)
	}
	p.counts[sp.Entity] = sp
	if time.Since(p.last) < progressEvery {
		return
	}
	p.last = time.Now()
	archived, purged := 0, 0
	for _, c := range p.counts {
		archived += c.Archived
		purged += c.Purged
	}
	fmt.Fprintf(p.e.stderr, "%s sweep: %d archived, %d purged so far (now %s), %.0f records/s, %s\n",
		p.e.name, archived, purged, sp.Entity, rate(archived+purged, sp.Elapsed), human(sp.Elapsed))
	p.printed = true
}

// done ends the progress lines.
func (p *progress) done() {
	if p.printed {
		fmt.Fprintf(p.e.stderr, "%s sweep: done\n", p.e.name)
	}
}

// tables merges the tables a stopped sweep finished with the progress of
// the one it was in.
func (p *progress) tables(finished []TableSweep) []TableSweep {
	out := append([]TableSweep(nil), finished...)
	for _, entity := range p.order {
		seen := false
		for _, t := range finished {
			seen = seen || t.Entity == entity
		}
		if seen {
			continue
		}
		c := p.counts[entity]
		ts := TableSweep{Entity: entity, Archived: c.Archived, Purged: c.Purged}
		if r, ok := p.e.backend.Records(entity); ok {
			ts.Table = r.Table
		}
		out = append(out, ts)
	}
	return out
}
