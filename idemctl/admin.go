package idemctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/goovo/idem"
	"github.com/goovo/idem/idembackend"
	"github.com/goovo/idem/internal/engine"
	"github.com/goovo/idem/internal/fingerprint"
	"github.com/goovo/idem/internal/idemkey"
	"github.com/goovo/idem/internal/store"
	"github.com/goovo/idem/internal/timer"
)

// Admin maintains the records of a hook's backend outside any request:
// the retention sweeper, and what an operator inspects (one key,
// statistics, stuck and failed records, what the recoverer finished). It
// needs no GraphQL server; the command line of this package (Command) is
// a thin layer over it.
type Admin struct {
	cfg   idem.Config
	hook  *idem.Hook
	store store.Driver

	// swept is, per table and short-lived mutation, the cutoff of this
	// Admin's last complete pass over the mutation's records: everything
	// of it completed before then is archived, so the next pass reads the
	// records completed since (less sweptMargin), not the whole band down
	// to the table's cutoff.
	mu    sync.Mutex
	swept map[sweptKey]time.Time
	// failedSeen is what the sweeper last logged of the failed records,
	// so that it logs them again only when they change.
	failedSeen string
	// promised is, per record table, TableSweep.Promised of this Admin's
	// last sweep (MetricSweepPromised).
	promised map[string]int
	// replicationReported: ReportReplication has logged.
	replicationReported bool
}

// sweptKey names one mutation's records in one table.
type sweptKey struct{ table, mutation string }

// sweptMargin is how far before the last pass's cutoff the next pass of a
// mutation reads again: a record stamped completed before that cutoff but
// committed after the pass (a completion's clock reading is at most
// seconds old), or skipped as locked by another sweeper whose batch then
// failed. A record missed even so is archived by the table's retention:
// the server refuses it past its own retention either way.
const sweptMargin = 10 * time.Minute

// New returns the Admin of hook: its backend, with its retention (and each
// record table's), tombstone horizon, lease, clock and logger, so that the
// sweeper expires what the server stops replaying, and nothing else. Once
// the hook serves (idem.Hook.Handler has read the GraphQL schema), the
// sweeper also archives the records of a mutation with a shorter
// @idempotent(retentionSeconds:) once that retention has passed
// (idem.Hook.MutationRetentions); so does an operator's program whose hook
// read the schema (idem.Hook.ReadSchema, Command.Schema). An Admin of a
// hook that knows no schema archives every record by its entity's
// retention, the upper bound of its mutations'. An operator's program without a
// server makes the hook from the same configuration as the server
// (Config.Tenant is not needed):
//
//	hook, err := idem.New(idem.Config{Backend: client.IdempotencyBackend()})
//	admin := idemctl.New(hook)
//	go admin.RunSweeper(ctx, time.Minute, idemctl.SweepOptions{})
func New(hook *idem.Hook) *Admin {
	cfg := hook.Config()
	d, err := store.Open(cfg.Backend.Dialect(), cfg.Backend, store.Options{Offset: cfg.Clock.Offset})
	if err != nil {
		panic("idemctl: " + err.Error()) // idem.New opened the same store: it cannot fail here
	}
	return &Admin{cfg: cfg, hook: hook, store: d, swept: map[sweptKey]time.Time{}}
}

// Ping checks that the backend's database can be reached. Its error, like
// every error of the Admin's methods, names the database's own problem (for
// operators, never for clients).
func (a *Admin) Ping(ctx context.Context) error { return a.store.Ping(ctx) }

// DefaultSweepBatch is the number of records one sweep transaction moves.
const DefaultSweepBatch = 1000

// SweepOptions configure one sweep.
type SweepOptions struct {
	// BatchSize bounds the records one transaction archives or purges, and
	// so how long its locks last. Default DefaultSweepBatch.
	BatchSize int
	// Pause between batches, to yield to live traffic. Default 0.
	Pause time.Duration
	// DryRun counts what a sweep would do and changes nothing.
	DryRun bool
	// Progress, when set, is called after every batch.
	Progress func(SweepProgress)
}

// SweepProgress reports a sweep in flight.
type SweepProgress struct {
	Entity   string
	Archived int // so far, in this table
	Purged   int
	Elapsed  time.Duration
}

// SweepReport is what a sweep did (or, in a dry run, would do), per entity.
type SweepReport struct {
	Tables  []TableSweep  `json:"tables"`
	Elapsed time.Duration `json:"elapsed"`
	DryRun  bool          `json:"dryRun,omitempty"`
}

// TableSweep is a sweep's work in one record table.
type TableSweep struct {
	Entity string `json:"entity"`
	Table  string `json:"table"`
	// Archived responses moved to the archive table (tombstones left).
	Archived int `json:"archived"`
	// Purged tombstones past the horizon, and claims abandoned in pending
	// for as long (the keys forgotten).
	Purged int `json:"purged"`
	// Promised counts the records past this sweep's retention that it
	// kept because their answers promised them for longer (expiresAt:
	// a server with a longer retention answered them), and PromisedUntil
	// is the latest of those promises. A record's expiry is fixed when
	// its answer is given; a sweeper's retention never shortens it.
	Promised      int       `json:"promised,omitempty"`
	PromisedUntil time.Time `json:"promisedUntil,omitzero"`
}

// Archived sums the archived records of all tables.
func (r SweepReport) Archived() (n int) {
	for _, t := range r.Tables {
		n += t.Archived
	}
	return n
}

// Purged sums the purged tombstones of all tables.
func (r SweepReport) Purged() (n int) {
	for _, t := range r.Tables {
		n += t.Purged
	}
	return n
}

// ErrNoArchive is returned by Sweep when the backend's ent package has no
// idemschema.Archive entity to move responses to.
var ErrNoArchive = errors.New("idem: no archive table: add `type IdempotencyArchive struct{ idemschema.Archive }` to the ent schema and regenerate")

// Sweep archives the responses of finished records past their retention
// window (their entity's, or, when the hook serves, their mutation's
// shorter one: see New) and purges tombstones a horizon after they were
// archived, in batches of one short
// transaction each: a record's response is in its table or in the archive,
// never both and never neither, and a sweeper killed between or inside
// batches loses nothing. Several sweepers may run at once; on PostgreSQL
// they skip each other's rows (SKIP LOCKED) instead of waiting.
//
// When ctx ends, the batch under way runs to its end (one short
// transaction) and Sweep returns ctx's error with a report of every batch
// done, the last table's included: a batch either is in the report or
// changed nothing.
func (a *Admin) Sweep(ctx context.Context, opts SweepOptions) (SweepReport, error) {
	if opts.BatchSize <= 0 {
		opts.BatchSize = DefaultSweepBatch
	}
	archive := a.cfg.Backend.ArchiveTable()
	if archive == "" {
		return SweepReport{}, ErrNoArchive
	}
	start := time.Now()
	report := SweepReport{DryRun: opts.DryRun}
	for _, recs := range a.cfg.Backend.RecordTables() {
		ts, err := a.sweepTable(ctx, recs, archive, opts, start)
		report.Tables = append(report.Tables, ts)
		if err == nil && !opts.DryRun {
			a.mu.Lock()
			if a.promised == nil {
				a.promised = map[string]int{}
			}
			a.promised[recs.Table] = ts.Promised
			a.mu.Unlock()
		}
		if err != nil {
			report.Elapsed = time.Since(start)
			return report, err
		}
	}
	report.Elapsed = time.Since(start)
	return report, nil
}

// sweepTable archives, purges and forgets what is due in one record table,
// batch after batch.
func (a *Admin) sweepTable(ctx context.Context, recs *idembackend.RecordTable, archive string, opts SweepOptions, start time.Time) (TableSweep, error) {
	ts := TableSweep{Entity: recs.Entity, Table: recs.Table}
	reading, err := a.store.Now(ctx)
	if err != nil {
		return ts, err
	}
	now := reading.Now()
	at := sweepAt{reading: reading, now: now, expireBefore: now.Add(-store.RetentionOf(recs, a.cfg.Retention))}
	for _, step := range a.sweepSteps(ctx, recs, archive, opts, &ts, at) {
		if err := step.run(ctx, opts, func() {
			if opts.Progress != nil {
				opts.Progress(SweepProgress{Entity: recs.Entity, Archived: ts.Archived, Purged: ts.Purged, Elapsed: time.Since(start)})
			}
		}); err != nil {
			return ts, err
		}
	}
	// What this sweep's retention would have archived but the records'
	// own expiry kept: its settings disagree with the server's.
	n, until, err := a.store.Promised(ctx, store.PromisedQuery{Table: store.TableOf(recs), CompletedBefore: at.expireBefore, Now: reading.Now()})
	if err != nil {
		return ts, err
	}
	ts.Promised, ts.PromisedUntil = n, until
	return ts, nil
}

// sweepAt is when a table's sweep runs: the database clock's reading, the
// time it read (now), and the table's cutoff (now less its retention).
type sweepAt struct {
	reading      store.Reading
	now          time.Time
	expireBefore time.Time
}

// sweepStep is one kind of batch of a table's sweep, run until a batch
// finds less than a full one to do.
type sweepStep struct {
	count *int // the report's count the step adds to
	batch func(dryRun bool) (int, error)
	done  func() // after the step's last batch, when all went well (not in a dry run)
}

// sweepSteps are the steps of the sweep of recs, in order, counted in ts:
// archive what the table's retention has expired (before at.expireBefore),
// then what each mutation with a shorter retention has,
// then purge the tombstones and the abandoned claims past the horizon.
//
// A batch runs to its end once begun, even if ctx ends meanwhile: one
// cancelled while its COMMIT is on the way may have committed, and would
// then be missing from the report. ctx is checked between batches (and
// during the pause) instead (sweepStep.run). A batch is one short
// transaction.
func (a *Admin) sweepSteps(ctx context.Context, recs *idembackend.RecordTable, archive string, opts SweepOptions, ts *TableSweep, at sweepAt) []sweepStep {
	now, reading, table := at.now, at.reading, store.TableOf(recs)
	// archived_at is after completion, so a tombstone archived before this
	// completed before now - horizon, whichever sweeper archived it and by
	// whichever retention (a sweeper that knows a mutation's shorter one
	// archives its records earlier than one that does not).
	purgeBefore := now.Add(-a.cfg.TombstoneHorizon)
	// A claim abandoned in pending is forgotten a horizon after its lease
	// ran out.
	abandonedBefore := now.Add(-a.cfg.TombstoneHorizon)
	batchCtx := context.WithoutCancel(ctx)
	steps := []sweepStep{
		{&ts.Archived, func(dryRun bool) (int, error) {
			return a.store.ArchiveBatch(batchCtx, store.ArchiveBatch{Table: table, Archive: archive,
				CompletedBefore: at.expireBefore, Now: reading.Now(), Limit: opts.BatchSize, DryRun: dryRun})
		}, nil},
	}
	steps = append(steps, a.mutationSweepSteps(batchCtx, recs, archive, opts, ts, at)...)
	return append(steps, []sweepStep{
		{&ts.Purged, func(dryRun bool) (int, error) {
			return a.store.PurgeBatch(batchCtx, store.PurgeBatch{Table: table, RecordOnly: recs.RecordOnly,
				ArchivedBefore: purgeBefore, Limit: opts.BatchSize, DryRun: dryRun})
		}, nil},
		{&ts.Purged, func(dryRun bool) (int, error) {
			return a.store.PurgeAbandoned(batchCtx, store.AbandonedBatch{Table: table,
				LeaseEndedBefore: abandonedBefore, Limit: opts.BatchSize, DryRun: dryRun})
		}, nil},
	}...)
}

// mutationSweepSteps archive the records of each mutation of recs that
// replays for less than the table, completed since the table's cutoff
// (at.expireBefore: older ones go with the table's step), or since this
// Admin's last pass over them.
func (a *Admin) mutationSweepSteps(batchCtx context.Context, recs *idembackend.RecordTable, archive string, opts SweepOptions, ts *TableSweep, at sweepAt) []sweepStep {
	now, reading, table := at.now, at.reading, store.TableOf(recs)
	var steps []sweepStep
	for _, m := range a.mutationRetentions(recs.Entity) {
		key := sweptKey{table.Name, m.Mutation}
		cutoff := now.Add(-m.Retention)
		since := at.expireBefore
		a.mu.Lock()
		if last, ok := a.swept[key]; ok && last.Add(-sweptMargin).After(since) {
			since = last.Add(-sweptMargin)
		}
		a.mu.Unlock()
		steps = append(steps, sweepStep{&ts.Archived, func(dryRun bool) (int, error) {
			return a.store.ArchiveBatch(batchCtx, store.ArchiveBatch{Table: table, Archive: archive,
				CompletedBefore: cutoff, CompletedSince: since, FingerprintPrefix: fingerprint.Prefix(m.Mutation),
				Now: reading.Now(), Limit: opts.BatchSize, DryRun: dryRun})
		}, func() {
			a.mu.Lock()
			if cutoff.After(a.swept[key]) {
				a.swept[key] = cutoff
			}
			a.mu.Unlock()
		}})
	}
	return steps
}

// run runs the step's batches, pausing opts.Pause between them and
// calling progress after each; a dry run counts once.
func (step sweepStep) run(ctx context.Context, opts SweepOptions, progress func()) error {
	if opts.DryRun {
		n, err := step.batch(true)
		if err == nil {
			*step.count += n
		}
		return err
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, err := step.batch(false)
		if err != nil {
			return err
		}
		*step.count += n
		progress()
		if n < opts.BatchSize {
			if step.done != nil {
				step.done()
			}
			return nil
		}
		if err := timer.Sleep(ctx, opts.Pause); err != nil {
			return err
		}
	}
}

// mutationRetentions are the mutations of entity whose retention is
// shorter than the entity's, as far as the hook knows (see New).
func (a *Admin) mutationRetentions(entity string) []idem.MutationRetention {
	var out []idem.MutationRetention
	all, _ := a.hook.MutationRetentions()
	for _, m := range all {
		if m.Entity == entity {
			out = append(out, m)
		}
	}
	return out
}

// RunSweeper sweeps every interval until ctx ends, and logs what it did and
// any stuck or failed records, so that a human can act on them.
func (a *Admin) RunSweeper(ctx context.Context, every time.Duration, opts SweepOptions) {
	a.ReportReplication(ctx)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		report, err := a.Sweep(ctx, opts)
		switch {
		case err != nil && ctx.Err() == nil:
			a.cfg.Logger.Error("idempotency sweep failed", slog.Any("error", err))
		case err == nil && (report.Archived() > 0 || report.Purged() > 0):
			a.cfg.Logger.Info("idempotency sweep", slog.Int("archived", report.Archived()), slog.Int("purged", report.Purged()),
				slog.Duration("elapsed", report.Elapsed))
		case err == nil:
			a.cfg.Logger.Debug("idempotency sweep", slog.Int("archived", 0), slog.Duration("elapsed", report.Elapsed))
		}
		if err == nil {
			a.reportStuck(ctx)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// reportStuck logs pending records several leases past their lease, and
// failed records, in one line each.
func (a *Admin) reportStuck(ctx context.Context) {
	stuck, err := a.Stuck(ctx, stuckAfter*a.cfg.Lease, 10)
	if err == nil && len(stuck) > 0 {
		a.cfg.Logger.Warn("idempotency records stuck in pending; inspect them with idemctl stuck",
			slog.Int("shown", len(stuck)), slog.String("oldest_entity", stuck[0].Entity), slog.Any("oldest_claimed_at", stuck[0].ClaimedAt))
	}
	// The failed records are logged when they change (the newest one, or
	// how many are shown), not at every sweep: they are ordinary final
	// errors, kept for their retention.
	failed, _, err := a.Failed(ctx, FailedOptions{Limit: 10})
	if err == nil && len(failed) > 0 {
		newest := failed[0].Table + "/" + failed[0].Tenant + "/" + failed[0].Key
		for _, f := range failed[1:] {
			if f.CompletedAt != nil && failed[0].CompletedAt != nil && f.CompletedAt.After(*failed[0].CompletedAt) {
				newest = f.Table + "/" + f.Tenant + "/" + f.Key
			}
		}
		seen := fmt.Sprint(len(failed), newest)
		a.mu.Lock()
		changed := seen != a.failedSeen
		a.failedSeen = seen
		a.mu.Unlock()
		if changed {
			a.cfg.Logger.Info("idempotency records failed (final errors, replayed to retries); list them with idemctl failed",
				slog.Int("shown", len(failed)))
		}
	}
}

// stuckAfter is how many leases past its lease a pending record must be to
// count as stuck: a takeover should have happened long before.
const stuckAfter = 3

// RecordInfo is one record as an operator sees it.
type RecordInfo struct {
	Entity string `json:"entity"`
	Table  string `json:"table"`
	Tenant string `json:"tenant"`
	Key    string `json:"key"`
	// State is pending, succeeded or failed, "tombstone" for an archived
	// record's row, or "archived" for its copy in the archive table.
	State string `json:"state"`
	// Status is the record's status (pending, succeeded, failed), also for
	// tombstones and archived copies.
	Status         string     `json:"status"`
	Operation      string     `json:"operation,omitempty"`
	Attempt        int        `json:"attempt"`
	LeaseExpiresAt *time.Time `json:"leaseExpiresAt,omitempty"`
	ClaimedAt      *time.Time `json:"claimedAt,omitempty"`
	CompletedAt    *time.Time `json:"completedAt,omitempty"`
	ArchivedAt     *time.Time `json:"archivedAt,omitempty"`
	// Data and Errors are the stored response, when the record holds one.
	Data   json.RawMessage `json:"data,omitempty"`
	Errors gqlerror.List   `json:"errors,omitempty"`
	// Recoverable: a pending claim that kept its operation, which a server
	// with Config.RecoverAfter runs again by itself if its client never
	// comes back; false for one that waits for its client (and is stored
	// as IDEMPOTENCY_ABANDONED past the retention window).
	Recoverable bool `json:"recoverable,omitempty"`
	// Recovered: a finished record whose attempt the recoverer ran
	// (Config.RecoverAfter), not a client.
	Recovered bool `json:"recovered,omitempty"`
}

// Inspect returns every record of (tenant, key), in every record table and
// in the archive. The key is validated first.
func (a *Admin) Inspect(ctx context.Context, tenant, key string) ([]RecordInfo, error) {
	if err := idemkey.Validate(key); err != nil {
		return nil, err
	}
	if tenant == "" {
		return nil, errors.New("idem: a tenant is required")
	}
	return a.list(func(recs *idembackend.RecordTable) ([]store.Row, error) {
		return a.store.Find(ctx, store.FindQuery{Table: store.TableOf(recs), Archive: a.cfg.Backend.ArchiveTable(), Tenant: tenant, Key: key})
	})
}

// Stuck lists pending records whose lease ran out more than olderThan ago
// (up to limit per table), oldest first.
func (a *Admin) Stuck(ctx context.Context, olderThan time.Duration, limit int) ([]RecordInfo, error) {
	reading, err := a.store.Now(ctx)
	if err != nil {
		return nil, err
	}
	return a.list(func(recs *idembackend.RecordTable) ([]store.Row, error) {
		return a.store.Stuck(ctx, store.StuckQuery{Table: store.TableOf(recs), LeaseEndedBefore: reading.Now().Add(-olderThan), Limit: limit})
	})
}

// FailedOptions selects the failed records Failed lists. The zero value
// lists every failed record, DefaultLimit per table.
type FailedOptions struct {
	// Limit is how many records to list per table (DefaultLimit when 0).
	Limit int
	// Tenant, when not "", lists only this tenant's records.
	Tenant string
	// Code, when not "", lists only the records with an error of this
	// code (its extensions.code), among the newest failedScan (10,000)
	// failed records of each table that the other options select.
	Code string
	// Since and Until, when not zero, list only the records completed at
	// or after Since and before Until.
	Since, Until time.Time
}

// failedScan bounds how many failed records of each table Failed reads to
// find those of a code: the code is kept in the stored response, which the
// store does not read, so the records are filtered here.
const failedScan = 10000

// Failed lists the newest failed records that still hold their response
// (the sweeper has not archived them), up to opts.Limit per table, newest
// first. complete is false when opts.Code is set and a table had more
// than failedScan (10,000) failed records to read: older ones were not.
func (a *Admin) Failed(ctx context.Context, opts FailedOptions) (infos []RecordInfo, complete bool, err error) {
	limit := opts.Limit
	if limit <= 0 {
		limit = DefaultLimit
	}
	complete = true
	for _, recs := range a.cfg.Backend.RecordTables() {
		q := store.FailedQuery{Table: store.TableOf(recs), Tenant: opts.Tenant, Since: opts.Since, Until: opts.Until, Limit: limit}
		if opts.Code != "" {
			q.Limit = failedScan
		}
		rows, err := a.store.Failed(ctx, q)
		if err != nil {
			return nil, false, err
		}
		if opts.Code != "" && len(rows) == failedScan {
			complete = false
		}
		n := 0
		for _, r := range rows {
			if ri := info(recs, r); n < limit && (opts.Code == "" || hasCode(ri.Errors, opts.Code)) {
				infos = append(infos, ri)
				n++
			}
		}
	}
	return infos, complete, nil
}

// hasCode reports whether one of errs has the code (extensions.code).
func hasCode(errs gqlerror.List, code string) bool {
	for _, e := range errs {
		if c, _ := e.Extensions["code"].(string); c == code {
			return true
		}
	}
	return false
}

// recoveredScan bounds how many of the newest finished records of each
// table Recovered reads: whether the recoverer ran an attempt is kept in
// the stored response, which the store does not read, so the records are
// filtered here.
const recoveredScan = 10000

// Recovered lists the records the recoverer finished (up to limit per
// table), newest first, among the newest recoveredScan (10,000) records of each
// table completed within the last within that still hold their response.
// table, when not "", names the one entity or table to read. complete is
// false when a table had more such records than that: older ones
// were not read.
func (a *Admin) Recovered(ctx context.Context, table string, within time.Duration, limit int) (infos []RecordInfo, complete bool, err error) {
	reading, err := a.store.Now(ctx)
	if err != nil {
		return nil, false, err
	}
	since := reading.Now().Add(-within)
	complete = true
	found := false
	for _, recs := range a.cfg.Backend.RecordTables() {
		if table != "" && table != recs.Entity && table != recs.Table {
			continue
		}
		found = true
		rows, err := a.store.Completed(ctx, store.CompletedQuery{Table: store.TableOf(recs), Since: since, Limit: recoveredScan})
		if err != nil {
			return nil, false, err
		}
		if len(rows) == recoveredScan {
			complete = false
		}
		n := 0
		for _, r := range rows {
			if ri := info(recs, r); ri.Recovered && n < limit {
				infos = append(infos, ri)
				n++
			}
		}
	}
	if !found {
		return nil, false, fmt.Errorf("idem: no record table %q", table)
	}
	return infos, complete, nil
}

// list collects the rows of every record table.
func (a *Admin) list(rows func(*idembackend.RecordTable) ([]store.Row, error)) ([]RecordInfo, error) {
	var out []RecordInfo
	for _, recs := range a.cfg.Backend.RecordTables() {
		rs, err := rows(recs)
		if err != nil {
			return nil, err
		}
		for _, r := range rs {
			out = append(out, info(recs, r))
		}
	}
	return out, nil
}

// Stats counts records by state.
type Stats struct {
	Tables []TableStats `json:"tables"`
	// ArchivedRecords and ArchiveBytes measure the archive table.
	ArchivedRecords int64 `json:"archivedRecords"`
	ArchiveBytes    int64 `json:"archiveBytes"`
	// Replication is what the PostgreSQL primary's settings keep through
	// a failover (CheckReplication); nil on SQLite.
	Replication *Replication `json:"replication,omitempty"`
}

// TableStats counts the records of one entity.
type TableStats struct {
	Entity     string `json:"entity"`
	Table      string `json:"table"`
	Pending    int64  `json:"pending"`
	Succeeded  int64  `json:"succeeded"`
	Failed     int64  `json:"failed"`
	Tombstones int64  `json:"tombstones"`
	// OldestPending is the claim time of the oldest pending record.
	OldestPending *time.Time `json:"oldestPending,omitempty"`
}

// Stats counts the records of every table, measures the archive, and
// reads the replication settings (PostgreSQL). It
// reads every row that has a key: an operator's command, not a hot path.
func (a *Admin) Stats(ctx context.Context) (Stats, error) {
	var st Stats
	for _, recs := range a.cfg.Backend.RecordTables() {
		ts, err := a.store.Stats(ctx, store.TableOf(recs))
		if err != nil {
			return st, err
		}
		st.Tables = append(st.Tables, TableStats{
			Entity: recs.Entity, Table: recs.Table,
			Pending: ts.Pending, Succeeded: ts.Succeeded, Failed: ts.Failed, Tombstones: ts.Tombstones,
			OldestPending: timePtr(ts.OldestPending),
		})
	}
	if archive := a.cfg.Backend.ArchiveTable(); archive != "" {
		var err error
		if st.ArchivedRecords, st.ArchiveBytes, err = a.store.ArchiveStats(ctx, archive); err != nil {
			return st, err
		}
	}
	var err error
	st.Replication, err = CheckReplication(ctx, a.cfg.Backend.DB(), a.cfg.Backend.Dialect())
	return st, err
}

func info(recs *idembackend.RecordTable, r store.Row) RecordInfo {
	ri := RecordInfo{
		Entity: recs.Entity, Table: recs.Table, Tenant: r.Tenant, Key: r.Key, State: r.Status, Status: r.Status, Attempt: r.Attempt,
		LeaseExpiresAt: timePtr(r.LeaseExpiresAt), ClaimedAt: timePtr(r.ClaimedAt),
		CompletedAt: timePtr(r.CompletedAt), ArchivedAt: timePtr(r.ArchivedAt),
		Recoverable: r.Recoverable,
	}
	if f, ok := fingerprint.Parse(r.Fingerprint); ok {
		ri.Operation = f.Field
	}
	switch {
	case r.Archived:
		ri.State = "archived"
	case !r.ArchivedAt.IsZero():
		ri.State = "tombstone"
	}
	if len(r.Response) > 0 {
		if data, errs, recovered, err := engine.ReadResponse(r.Response); err == nil {
			ri.Data, ri.Errors, ri.Recovered = data, errs, recovered
		} else {
			ri.Data = json.RawMessage(fmt.Sprintf("%q", "unreadable stored response: "+err.Error()))
		}
	}
	return ri
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
