package store

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"time"

	"github.com/goovo/idem/idembackend"
	"github.com/goovo/idem/internal/record"
)

// sqlDriver is the implementation the database/sql backends share: the
// protocol's statements, the operator's reads, and the plumbing (statements
// per table, error translation). What differs between backends is data
// (their statements, traits, classifier) and behaviour (clock, archive,
// purge), which postgres.go and sqlite.go set.
type sqlDriver struct {
	conn     Conn
	backend  string // for people: "PostgreSQL"
	traits   Traits
	classify classifier
	sql      statements
	clock    clock
	// quote quotes the tables' identifiers (Quote when nil).
	quote func(string) string
	// bind rewrites a statement's numbered placeholders ($1) into the
	// backend's own, with its arguments in their order; nil where the
	// backend reads numbered placeholders itself.
	bind func(q string, args []any) (string, []any)
	// retries is how often a statement that commits by itself, or a
	// batch's transaction, runs again after a deadlock (ErrConflict): on
	// InnoDB, where a deadlock rolls back a whole transaction, and
	// concurrent writers of one table meet one now and then; 0 elsewhere.
	retries int

	// archive and purge move one batch in tx, with the table's statements.
	archive func(ctx context.Context, tx idembackend.Tx, st statements, b ArchiveBatch) (int, error)
	purge   func(ctx context.Context, tx idembackend.Tx, st statements, b PurgeBatch) (int, error)

	mu     sync.Mutex
	tables map[tableKey]statements
}

// clock is how a backend tells the time.
type clock interface {
	// observed makes a reading of the database time a lookup returned
	// (NULL on backends whose lookup does not read it).
	observed(dbNow sql.NullTime) (Reading, error)
	// now returns a reading, running stmtNow on ex if it must.
	now(ctx context.Context, ex idembackend.Executor, query string) (Reading, error)
}

// localClock is the clock of a database that runs in this process: this
// machine's (SQLite).
type localClock struct{ offset func() time.Duration }

func (c localClock) observed(sql.NullTime) (Reading, error) { return c.reading(), nil }

func (c localClock) now(context.Context, idembackend.Executor, string) (Reading, error) {
	return c.reading(), nil
}

func (c localClock) reading() Reading {
	t := time.Now()
	return Reading{db: t.UTC(), read: t, offset: c.offset()}
}

func (d *sqlDriver) Traits() Traits { return d.traits }

// stmts returns the statements of a table, substituted once and cached.
func (d *sqlDriver) stmts(t Table, archive string) statements {
	k := tableKey{table: t, archive: archive}
	d.mu.Lock()
	defer d.mu.Unlock()
	st, ok := d.tables[k]
	if !ok {
		quote := d.quote
		if quote == nil {
			quote = Quote
		}
		st = d.sql.forTable(k, quote)
		d.tables[k] = st
	}
	return st
}

// query runs a statement that returns rows on ex, its placeholders bound.
func (d *sqlDriver) query(ctx context.Context, ex idembackend.Executor, q string, args ...any) (*sql.Rows, error) {
	if d.bind != nil {
		q, args = d.bind(q, args)
	}
	return ex.QueryContext(ctx, q, args...)
}

// exec runs a statement on ex, its placeholders bound.
func (d *sqlDriver) exec(ctx context.Context, ex idembackend.Executor, q string, args ...any) (sql.Result, error) {
	if d.bind != nil {
		q, args = d.bind(q, args)
	}
	return ex.ExecContext(ctx, q, args...)
}

// err makes err an *Error of op.
func (d *sqlDriver) err(op string, err error) error { return wrap(d.backend, d.classify, op, err) }

func (d *sqlDriver) Now(ctx context.Context) (Reading, error) {
	r, err := d.clock.now(ctx, d.conn.DB(), d.sql[stmtNow])
	return r, d.err("read clock", err)
}

func (d *sqlDriver) Lookup(ctx context.Context, ref Ref) (*record.Record, Reading, error) {
	rows, err := d.query(ctx, d.conn.DB(), d.stmts(ref.Table, "")[stmtLookup], ref.Tenant, ref.Key)
	if err != nil {
		return nil, Reading{}, d.err("lookup", err)
	}
	defer rows.Close()
	var (
		rec     *record.Record
		reading Reading
	)
	if rows.Next() {
		rec, reading, err = d.scanLookup(rows.Scan)
	} else if err = rows.Err(); err == nil {
		reading, err = d.clock.observed(sql.NullTime{})
	}
	if err == nil {
		err = rows.Err()
	}
	if err != nil {
		return nil, Reading{}, d.err("lookup", err)
	}
	return rec, reading, nil
}

// scanLookup reads the row of stmtLookup: the database time, then the
// record's columns (NULL when the key is unknown).
func (d *sqlDriver) scanLookup(scan func(dest ...any) error) (*record.Record, Reading, error) {
	var l lookupRow
	if err := scan(&l.dbNow, &l.status, &l.fingerprint, &l.response, &l.attempt, &l.lease, &l.claimed, &l.completed, &l.archived); err != nil {
		return nil, Reading{}, err
	}
	return d.lookedUp(&l)
}

// lookupRow is the row of stmtLookup, as database/sql scans it.
type lookupRow struct {
	dbNow                     sql.NullTime
	status, fingerprint       sql.NullString
	response                  []byte
	attempt                   sql.NullInt64
	lease, claimed, completed sql.NullTime
	archived                  sql.NullTime
}

// lookedUp makes the reading and the record (nil: the key is unknown) of
// a row of stmtLookup.
func (d *sqlDriver) lookedUp(l *lookupRow) (*record.Record, Reading, error) {
	reading, err := d.clock.observed(l.dbNow)
	if err != nil {
		return nil, Reading{}, err
	}
	if !l.status.Valid && !l.fingerprint.Valid {
		return nil, reading, nil
	}
	return &record.Record{
		Status:         l.status.String,
		Fingerprint:    l.fingerprint.String,
		Response:       l.response,
		Attempt:        int(l.attempt.Int64),
		LeaseExpiresAt: l.lease.Time.UTC(),
		ClaimedAt:      l.claimed.Time.UTC(),
		CompletedAt:    l.completed.Time.UTC(),
		ArchivedAt:     l.archived.Time.UTC(),
	}, reading, nil
}

func (d *sqlDriver) Begin(ctx context.Context) (context.Context, idembackend.Tx, error) {
	txCtx, tx, err := d.conn.BeginTx(ctx)
	if err != nil {
		return ctx, nil, d.err("begin", err)
	}
	return txCtx, tx, nil
}

func (d *sqlDriver) Claim(ctx context.Context, c Claim) (Claimed, error) {
	won, err := c.Insert(ctx, c.Tx)
	return d.inserted(ctx, c, won, err)
}

// inserted decides a claim whose insert returned won and err.
func (d *sqlDriver) inserted(ctx context.Context, c Claim, won bool, err error) (Claimed, error) {
	if won && err == nil {
		return Claimed{Won: true}, nil
	}
	if c.Tx != nil {
		// Before the lookup: a duplicate must not hold one connection
		// while it waits for another (a pool of them would deadlock).
		_ = c.Tx.Rollback()
	}
	if err != nil {
		return Claimed{}, d.err("claim", err)
	}
	// The winner of a key is whoever holds the row; the lookup reads it in
	// a statement of its own, so that it sees a row another transaction
	// committed after the insert started waiting for it.
	holder, reading, err := d.Lookup(ctx, c.Ref)
	if err != nil {
		return Claimed{}, err
	}
	return Claimed{Holder: holder, Reading: reading}, nil
}

func (d *sqlDriver) Savepoint(ctx context.Context, tx idembackend.Tx) error {
	_, err := tx.ExecContext(ctx, d.sql[stmtSavepoint])
	return d.err("savepoint", err)
}

func (d *sqlDriver) TakeOver(ctx context.Context, t TakeOver) (bool, error) {
	return d.updateAlone(ctx, "take over", d.stmts(t.Ref.Table, "")[stmtTakeOver],
		t.Ref.Tenant, t.Ref.Key, t.LeaseUntil.UTC(), t.Attempt, t.Now.UTC())
}

func (d *sqlDriver) Renew(ctx context.Context, l Lease) (bool, error) {
	return d.setLease(ctx, "renew", l)
}

func (d *sqlDriver) Release(ctx context.Context, l Lease) error {
	_, err := d.setLease(ctx, "release", l)
	return err
}

func (d *sqlDriver) setLease(ctx context.Context, op string, l Lease) (bool, error) {
	return d.updateAlone(ctx, op, d.stmts(l.Ref.Table, "")[stmtSetLease], l.Ref.Tenant, l.Ref.Key, l.Until.UTC(), l.Attempt)
}

func (d *sqlDriver) Complete(ctx context.Context, tx idembackend.Tx, c Completion) (bool, error) {
	if tx == nil {
		return d.updateAlone(ctx, "complete", d.stmts(c.Ref.Table, "")[stmtComplete], completionArgs(c)...)
	}
	if c.DiscardWrites {
		if _, err := tx.ExecContext(ctx, d.sql[stmtRollbackToSavepoint]); err != nil {
			_ = tx.Rollback()
			return false, d.err("rollback to savepoint", err)
		}
	}
	ok, err := d.complete(ctx, tx, c)
	if err != nil || !ok {
		_ = tx.Rollback()
		return false, err
	}
	if err := tx.Commit(); err != nil {
		return false, d.err("commit", err)
	}
	return true, nil
}

// expiry is Completion.ExpiresAt as a statement's argument: NULL when
// there is none.
func expiry(c Completion) any {
	if c.ExpiresAt.IsZero() {
		return nil
	}
	return c.ExpiresAt.UTC()
}

func (d *sqlDriver) complete(ctx context.Context, ex idembackend.Executor, c Completion) (bool, error) {
	return d.update(ctx, ex, "complete", d.stmts(c.Ref.Table, "")[stmtComplete], completionArgs(c)...)
}

// completionArgs are the arguments of stmtComplete.
func completionArgs(c Completion) []any {
	return []any{c.Ref.Tenant, c.Ref.Key, c.Status, c.Response, c.At.UTC(), c.Attempt, expiry(c)}
}

// updateAlone runs a fenced transition in a statement that commits by
// itself, again after a deadlock (d.retries): the deadlock rolled it back
// whole, and its fence decides anew.
func (d *sqlDriver) updateAlone(ctx context.Context, op, query string, args ...any) (bool, error) {
	for try := 0; ; try++ {
		ok, err := d.update(ctx, d.conn.DB(), op, query, args...)
		if try >= d.retries || !errors.Is(err, ErrConflict) {
			return ok, err
		}
	}
}

// update runs a fenced transition and reports whether it changed the row.
func (d *sqlDriver) update(ctx context.Context, ex idembackend.Executor, op, query string, args ...any) (bool, error) {
	n, err := d.affected(ctx, ex, op, query, args...)
	return n == 1, err
}

func (d *sqlDriver) Ping(ctx context.Context) error {
	_, err := d.count(ctx, d.conn.DB(), "ping", d.sql[stmtPing])
	return err
}

func (d *sqlDriver) ArchiveBatch(ctx context.Context, b ArchiveBatch) (int, error) {
	st := d.stmts(b.Table, b.Archive)
	if b.DryRun {
		return d.count(ctx, d.conn.DB(), "count archivable", st[stmtCountArchivable], b.CompletedBefore.UTC(), b.FingerprintPrefix, b.CompletedSince.UTC(), b.Now.UTC())
	}
	return d.inTx(ctx, "archive", func(tx idembackend.Tx) (int, error) { return d.archive(ctx, tx, st, b) })
}

func (d *sqlDriver) Promised(ctx context.Context, q PromisedQuery) (int, time.Time, error) {
	rows, err := d.query(ctx, d.conn.DB(), d.stmts(q.Table, "")[stmtPromised], q.CompletedBefore.UTC(), q.Now.UTC())
	if err != nil {
		return 0, time.Time{}, d.err("promised", err)
	}
	defer rows.Close()
	var (
		n     int
		until any
	)
	if rows.Next() {
		if err := rows.Scan(&n, &until); err != nil {
			return 0, time.Time{}, d.err("promised", err)
		}
	}
	if err := rows.Err(); err != nil {
		return 0, time.Time{}, d.err("promised", err)
	}
	return n, asTime(until), nil
}

func (d *sqlDriver) PurgeBatch(ctx context.Context, b PurgeBatch) (int, error) {
	st := d.stmts(b.Table, "")
	if b.DryRun {
		return d.count(ctx, d.conn.DB(), "count purgeable", st[stmtCountPurgeable], b.ArchivedBefore.UTC())
	}
	if b.RecordOnly {
		return d.inTx(ctx, "purge", func(tx idembackend.Tx) (int, error) {
			return d.affected(ctx, tx, "purge", st[stmtPurgeRecordOnly], b.ArchivedBefore.UTC(), b.Limit)
		})
	}
	return d.inTx(ctx, "purge", func(tx idembackend.Tx) (int, error) { return d.purge(ctx, tx, st, b) })
}

func (d *sqlDriver) PurgeAbandoned(ctx context.Context, b AbandonedBatch) (int, error) {
	st := d.stmts(b.Table, "")
	if b.DryRun {
		return d.count(ctx, d.conn.DB(), "count abandoned", st[stmtCountAbandoned], b.LeaseEndedBefore.UTC())
	}
	return d.inTx(ctx, "purge abandoned", func(tx idembackend.Tx) (int, error) {
		return d.affected(ctx, tx, "purge abandoned", st[stmtPurgeAbandoned], b.LeaseEndedBefore.UTC(), b.Limit)
	})
}

// inTx runs one batch in a transaction of its own: a record is moved
// entirely or not at all. A batch that a deadlock rolled back runs again
// (d.retries).
func (d *sqlDriver) inTx(ctx context.Context, op string, batch func(tx idembackend.Tx) (int, error)) (int, error) {
	for try := 0; ; try++ {
		n, err := d.inTxOnce(ctx, op, batch)
		if try >= d.retries || !errors.Is(err, ErrConflict) {
			return n, err
		}
	}
}

func (d *sqlDriver) inTxOnce(ctx context.Context, op string, batch func(tx idembackend.Tx) (int, error)) (int, error) {
	_, tx, err := d.conn.BeginTx(ctx)
	if err != nil {
		return 0, d.err(op+": begin", err)
	}
	n, err := batch(tx)
	if err != nil {
		_ = tx.Rollback()
		return 0, d.err(op, err)
	}
	if err := tx.Commit(); err != nil {
		return 0, d.err(op+": commit", err)
	}
	return n, nil
}

func (d *sqlDriver) Stats(ctx context.Context, t Table) (TableStats, error) {
	rows, err := d.query(ctx, d.conn.DB(), d.stmts(t, "")[stmtStats])
	if err != nil {
		return TableStats{}, d.err("stats", err)
	}
	defer rows.Close()
	var st TableStats
	var oldest any
	if rows.Next() {
		if err := rows.Scan(&st.Pending, &st.Succeeded, &st.Failed, &st.Tombstones, &oldest); err != nil {
			return st, d.err("stats", err)
		}
	}
	st.OldestPending = asTime(oldest)
	return st, d.err("stats", rows.Err())
}

func (d *sqlDriver) ArchiveStats(ctx context.Context, archive string) (n, bytes int64, err error) {
	rows, err := d.query(ctx, d.conn.DB(), d.stmts(Table{}, archive)[stmtArchiveStats])
	if err != nil {
		return 0, 0, d.err("archive stats", err)
	}
	defer rows.Close()
	if rows.Next() {
		if err := rows.Scan(&n, &bytes); err != nil {
			return 0, 0, d.err("archive stats", err)
		}
	}
	return n, bytes, d.err("archive stats", rows.Err())
}

func (d *sqlDriver) Stuck(ctx context.Context, q StuckQuery) ([]Row, error) {
	return d.rows(ctx, q.Table.Name, false, d.stmts(q.Table, "")[stmtStuck], q.LeaseEndedBefore.UTC(), q.Limit)
}

func (d *sqlDriver) Requeue(ctx context.Context, r Requeue) (bool, error) {
	return d.updateAlone(ctx, "requeue", d.stmts(r.Ref.Table, "")[stmtRequeue],
		r.Ref.Tenant, r.Ref.Key, r.Now.UTC(), r.Attempt, r.LeaseEndedBefore.UTC())
}

func (d *sqlDriver) Abandoned(ctx context.Context, q AbandonedQuery) ([]AbandonedClaim, error) {
	rows, err := d.query(ctx, d.conn.DB(), d.stmts(q.Table, "")[stmtAbandoned], q.LeaseEndedBefore.UTC(), q.Limit, q.ClaimedBefore.UTC())
	if err != nil {
		return nil, d.err("list abandoned", err)
	}
	defer rows.Close()
	var out []AbandonedClaim
	for rows.Next() {
		var c AbandonedClaim
		var key, fingerprint sql.NullString
		var attempt sql.NullInt64
		var lease, claimed any
		if err := rows.Scan(&c.Tenant, &key, &fingerprint, &attempt, &lease, &claimed, &c.Operation); err != nil {
			return nil, d.err("list abandoned", err)
		}
		c.Key, c.Fingerprint, c.Attempt = key.String, fingerprint.String, int(attempt.Int64)
		c.LeaseExpiresAt, c.ClaimedAt = asTime(lease), asTime(claimed)
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, d.err("list abandoned", err)
	}
	return out, nil
}

// endOfTime stands for no upper bound on a time.
var endOfTime = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)

func (d *sqlDriver) Failed(ctx context.Context, q FailedQuery) ([]Row, error) {
	until := q.Until
	if until.IsZero() {
		until = endOfTime
	}
	return d.rows(ctx, q.Table.Name, false, d.stmts(q.Table, "")[stmtFailed], q.Limit, q.Tenant, q.Since.UTC(), until.UTC())
}

func (d *sqlDriver) Completed(ctx context.Context, q CompletedQuery) ([]Row, error) {
	return d.rows(ctx, q.Table.Name, false, d.stmts(q.Table, "")[stmtCompleted], q.Since.UTC(), q.Limit)
}

func (d *sqlDriver) Find(ctx context.Context, q FindQuery) ([]Row, error) {
	st := d.stmts(q.Table, q.Archive)
	hot, err := d.rows(ctx, q.Table.Name, false, st[stmtFind], q.Tenant, q.Key)
	if err != nil || q.Archive == "" {
		return hot, err
	}
	cold, err := d.rows(ctx, q.Table.Name, true, st[stmtFindArchived], q.Tenant, q.Key, q.Table.Name)
	return append(hot, cold...), err
}

// rows reads operator's rows: the scope, then rowColumns.
func (d *sqlDriver) rows(ctx context.Context, table string, archived bool, q string, args ...any) ([]Row, error) {
	rows, err := d.query(ctx, d.conn.DB(), q, args...)
	if err != nil {
		return nil, d.err("list", err)
	}
	defer rows.Close()
	var out []Row
	for rows.Next() {
		r := Row{Table: table, Archived: archived}
		var status, fingerprint, key sql.NullString
		var attempt sql.NullInt64
		var lease, claimed, completed, archivedAt any
		if err := rows.Scan(&r.Tenant, &key, &status, &fingerprint, &attempt, &r.Response, &lease, &claimed, &completed, &archivedAt, &r.Recoverable); err != nil {
			return nil, d.err("list", err)
		}
		r.Key, r.Status, r.Fingerprint, r.Attempt = key.String, status.String, fingerprint.String, int(attempt.Int64)
		r.LeaseExpiresAt, r.ClaimedAt, r.CompletedAt, r.ArchivedAt = asTime(lease), asTime(claimed), asTime(completed), asTime(archivedAt)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, d.err("list", err)
	}
	return out, nil
}

// affected runs a statement and returns the number of rows it changed.
func (d *sqlDriver) affected(ctx context.Context, ex idembackend.Executor, op, q string, args ...any) (int, error) {
	res, err := d.exec(ctx, ex, q, args...)
	if err != nil {
		return 0, d.err(op, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, d.err(op, err)
	}
	return int(n), nil
}

// count runs a statement that returns one number.
func (d *sqlDriver) count(ctx context.Context, ex idembackend.Executor, op, q string, args ...any) (int, error) {
	rows, err := d.query(ctx, ex, q, args...)
	if err != nil {
		return 0, d.err(op, err)
	}
	defer rows.Close()
	var n int
	if rows.Next() {
		if err := rows.Scan(&n); err != nil {
			return 0, d.err(op, err)
		}
	}
	if err := rows.Err(); err != nil {
		return 0, d.err(op, err)
	}
	return n, nil
}

// sqliteTimeLayouts are the forms SQLite hands back times in when a column
// type does not tell the driver to parse them (expressions, NULL columns).
var sqliteTimeLayouts = []string{
	"2006-01-02 15:04:05.999999999-07:00",
	"2006-01-02T15:04:05.999999999-07:00",
	"2006-01-02 15:04:05.999999999",
	time.RFC3339Nano,
}

func asTime(v any) time.Time {
	switch t := v.(type) {
	case time.Time:
		return t.UTC()
	case string:
		for _, layout := range sqliteTimeLayouts {
			if parsed, err := time.Parse(layout, t); err == nil {
				return parsed.UTC()
			}
		}
	case []byte:
		return asTime(string(t))
	}
	return time.Time{}
}
