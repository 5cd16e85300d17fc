// Package store holds the SQL of the idempotency records: one statement per
// transition of the state machine, for each backend. It is the only place
// that knows the record columns' SQL and the only place that sees driver
// errors, which it wraps in *Error so that an outage never reads as an
// answer.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// Dialect names, as ent spells them.
const (
	Postgres = "postgres"
	SQLite   = "sqlite3"
)

// Record states, as stored.
const (
	StatusPending   = "pending"
	StatusSucceeded = "succeeded"
	StatusFailed    = "failed"
)

// Executor runs SQL: *sql.DB, *sql.Tx, or an ent client or transaction.
type Executor interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// Table names a record table, its scope column and its primary key.
type Table struct {
	Name  string
	Scope string
	ID    string
}

// Record is the idempotency state of one (scope, key).
type Record struct {
	Status         string
	Fingerprint    string
	Response       []byte
	Attempt        int
	LeaseExpiresAt time.Time
	ClaimedAt      time.Time
	CompletedAt    time.Time
	// ArchivedAt is set once the sweeper moved the response to the archive:
	// the record is a tombstone.
	ArchivedAt time.Time
}

// Error is a failure of the record store itself: the database could not be
// reached, or a statement failed.
type Error struct {
	Op  string
	Err error
}

func (e *Error) Error() string { return "idempotency store: " + e.Op + ": " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Clock is a reading of the database clock, advanced by the local monotonic
// clock (which wall-clock steps do not move): every time the store writes or
// compares derives from such a reading, so that expiry is decided by the
// database's time, not by each server's wall clock.
type Clock struct {
	db     time.Time
	read   time.Time
	offset time.Duration
}

// Now returns the database time now.
func (c Clock) Now() time.Time { return c.db.Add(time.Since(c.read) + c.offset).UTC() }

// clockMaxAge is how long a reading of PostgreSQL's clock is reused before
// it is read again; the monotonic clock's drift over it is microseconds.
const clockMaxAge = 30 * time.Second

// Store runs the record statements of one dialect.
type Store struct {
	dialect string
	offset  func() time.Duration // added to the database clock (tests)

	mu    sync.Mutex
	stmts map[Table]*statements
	clk   Clock // latest reading of the database clock (PostgreSQL)
}

// New returns the store for an ent dialect name. offset, when not nil, is
// added to every reading of the database clock.
func New(dialect string, offset func() time.Duration) (*Store, error) {
	if offset == nil {
		offset = func() time.Duration { return 0 }
	}
	switch dialect {
	case Postgres, SQLite:
		return &Store{dialect: dialect, offset: offset, stmts: map[Table]*statements{}}, nil
	}
	return nil, fmt.Errorf("idempotency store: unsupported dialect %q (want %q or %q)", dialect, Postgres, SQLite)
}

// Dialect returns the store's ent dialect name.
func (s *Store) Dialect() string { return s.dialect }

type statements struct {
	lookup, takeOver, setLease, complete string
}

const recordColumns = "idempotency_status, idempotency_fingerprint, idempotency_response, idempotency_attempt, " +
	"idempotency_lease_expires_at, idempotency_claimed_at, idempotency_completed_at, idempotency_archived_at"

func (s *Store) statements(t Table) *statements {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, ok := s.stmts[t]; ok {
		return st
	}
	table, scope := quote(t.Name), quote(t.Scope)
	p := s.placeholders()
	where := fmt.Sprintf("%s = %s AND idempotency_key = %s", scope, p(1), p(2))
	st := &statements{
		// The winner of a key is whoever holds the row; the lookup reads it
		// in a statement of its own, so that it sees a row another
		// transaction committed after ours started waiting.
		lookup: "SELECT " + recordColumns + " FROM " + table + " WHERE " + where,
		// A takeover is one conditional statement: it succeeds for exactly
		// one caller, and only while the lease it saw has run out.
		takeOver: fmt.Sprintf("UPDATE %s SET idempotency_attempt = idempotency_attempt + 1, idempotency_lease_expires_at = %s "+
			"WHERE %s AND idempotency_status = 'pending' AND idempotency_attempt = %s AND idempotency_lease_expires_at <= %s",
			table, p(3), where, p(4), p(5)),
		// Completion and lease changes (release, renewal) are fenced by the
		// attempt: a worker that lost its claim changes nothing.
		complete: fmt.Sprintf("UPDATE %s SET idempotency_status = %s, idempotency_response = %s, idempotency_completed_at = %s "+
			"WHERE %s AND idempotency_status = 'pending' AND idempotency_attempt = %s",
			table, p(3), p(4), p(5), where, p(6)),
		setLease: fmt.Sprintf("UPDATE %s SET idempotency_lease_expires_at = %s "+
			"WHERE %s AND idempotency_status = 'pending' AND idempotency_attempt = %s",
			table, p(3), where, p(4)),
	}
	if s.dialect == Postgres {
		// One round trip reads the database clock along with the record.
		st.lookup = "SELECT now(), " + prefixed("r.", recordColumns) + " FROM (SELECT 1) AS one LEFT JOIN " + table +
			" AS r ON r." + scope + " = $1 AND r.idempotency_key = $2"
	}
	s.stmts[t] = st
	return st
}

// placeholders returns numbered parameter markers, so that a statement's
// arguments can be passed in one order whatever the order of the markers.
func (s *Store) placeholders() func(int) string {
	if s.dialect == Postgres {
		return func(i int) string { return fmt.Sprintf("$%d", i) }
	}
	return func(i int) string { return fmt.Sprintf("?%d", i) }
}

// Lookup reads the record of (tenant, key) and the database clock. It returns
// a nil record when the key is unknown.
func (s *Store) Lookup(ctx context.Context, ex Executor, t Table, tenant, key string) (*Record, Clock, error) {
	st := s.statements(t)
	rows, err := ex.QueryContext(ctx, st.lookup, tenant, key)
	if err != nil {
		return nil, Clock{}, &Error{Op: "lookup", Err: err}
	}
	defer rows.Close()
	var (
		dbNow                     sql.NullTime
		status, fingerprint       sql.NullString
		response                  []byte
		attempt                   sql.NullInt64
		lease, claimed, completed sql.NullTime
		archived                  sql.NullTime
		found                     bool
	)
	dest := []any{&status, &fingerprint, &response, &attempt, &lease, &claimed, &completed, &archived}
	if s.dialect == Postgres {
		dest = append([]any{&dbNow}, dest...)
	}
	if rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return nil, Clock{}, &Error{Op: "lookup", Err: err}
		}
		found = status.Valid || fingerprint.Valid
	}
	if err := rows.Err(); err != nil {
		return nil, Clock{}, &Error{Op: "lookup", Err: err}
	}
	if s.dialect == Postgres && !dbNow.Valid {
		return nil, Clock{}, &Error{Op: "lookup", Err: errors.New("no database time returned")}
	}
	clock := s.clock(dbNow.Time)
	if s.dialect == Postgres {
		s.mu.Lock()
		s.clk = clock
		s.mu.Unlock()
	}
	if !found {
		return nil, clock, nil
	}
	return &Record{
		Status:         status.String,
		Fingerprint:    fingerprint.String,
		Response:       response,
		Attempt:        int(attempt.Int64),
		LeaseExpiresAt: lease.Time.UTC(),
		ClaimedAt:      claimed.Time.UTC(),
		CompletedAt:    completed.Time.UTC(),
		ArchivedAt:     archived.Time.UTC(),
	}, clock, nil
}

// clock makes a Clock from the database time just read. SQLite runs in this
// process, so its clock is this machine's clock.
func (s *Store) clock(dbNow time.Time) Clock {
	read := time.Now()
	if s.dialect == SQLite {
		dbNow = read
	}
	return Clock{db: dbNow.UTC(), read: read, offset: s.offset()}
}

// Now returns a reading of the database clock without a round trip when a
// recent one exists (every lookup refreshes it).
func (s *Store) Now(ctx context.Context, ex Executor) (Clock, error) {
	if s.dialect == SQLite {
		return s.clock(time.Time{}), nil
	}
	s.mu.Lock()
	c := s.clk
	s.mu.Unlock()
	if !c.read.IsZero() && time.Since(c.read) < clockMaxAge {
		c.offset = s.offset()
		return c, nil
	}
	dbNow, err := readNow(ctx, ex)
	if err != nil {
		return Clock{}, &Error{Op: "read clock", Err: err}
	}
	c = s.clock(dbNow)
	s.mu.Lock()
	s.clk = c
	s.mu.Unlock()
	return c, nil
}

// TakeOver claims a pending record whose lease has run out at now for a new
// attempt (attempt+1) whose lease ends at leaseUntil. It reports false when
// someone else changed the record first.
func (s *Store) TakeOver(ctx context.Context, ex Executor, t Table, tenant, key string, attempt int, now, leaseUntil time.Time) (bool, error) {
	return s.update(ctx, ex, "take over", s.statements(t).takeOver, tenant, key, leaseUntil.UTC(), attempt, now.UTC())
}

// Complete stores the result of attempt, only while attempt still owns the
// pending record. It reports false when the attempt lost its claim.
func (s *Store) Complete(ctx context.Context, ex Executor, t Table, tenant, key string, attempt int, status string, response []byte, now time.Time) (bool, error) {
	return s.update(ctx, ex, "complete", s.statements(t).complete, tenant, key, status, response, now.UTC(), attempt)
}

// Release ends the lease of attempt at now, so that the next request with
// the key takes the claim over at once.
func (s *Store) Release(ctx context.Context, ex Executor, t Table, tenant, key string, attempt int, now time.Time) error {
	_, err := s.update(ctx, ex, "release", s.statements(t).setLease, tenant, key, now.UTC(), attempt)
	return err
}

// Renew extends the lease of attempt to until, while the attempt runs. It
// reports false when the attempt no longer holds the claim.
func (s *Store) Renew(ctx context.Context, ex Executor, t Table, tenant, key string, attempt int, until time.Time) (bool, error) {
	return s.update(ctx, ex, "renew", s.statements(t).setLease, tenant, key, until.UTC(), attempt)
}

func (s *Store) update(ctx context.Context, ex Executor, op, query string, args ...any) (bool, error) {
	res, err := ex.ExecContext(ctx, query, args...)
	if err != nil {
		return false, &Error{Op: op, Err: err}
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, &Error{Op: op, Err: err}
	}
	return n == 1, nil
}

// quote quotes an SQL identifier; both dialects accept double quotes.
func quote(ident string) string {
	return `"` + strings.ReplaceAll(ident, `"`, `""`) + `"`
}

func prefixed(prefix, columns string) string {
	parts := strings.Split(columns, ", ")
	for i := range parts {
		parts[i] = prefix + parts[i]
	}
	return strings.Join(parts, ", ")
}

// savepoint separates an atomic-mode claim from the resolver's writes, so
// that a final error can roll the writes back and still store the failure
// on the claim's row.
const savepoint = "idem_resolver"

// Savepoint marks the start of the resolver's writes in tx.
func (s *Store) Savepoint(ctx context.Context, tx Executor) error {
	if _, err := tx.ExecContext(ctx, "SAVEPOINT "+savepoint); err != nil {
		return &Error{Op: "savepoint", Err: err}
	}
	return nil
}

// RollbackToSavepoint undoes the resolver's writes in tx, keeping the claim.
func (s *Store) RollbackToSavepoint(ctx context.Context, tx Executor) error {
	if _, err := tx.ExecContext(ctx, "ROLLBACK TO SAVEPOINT "+savepoint); err != nil {
		return &Error{Op: "rollback to savepoint", Err: err}
	}
	return nil
}

func readNow(ctx context.Context, ex Executor) (time.Time, error) {
	rows, err := ex.QueryContext(ctx, "SELECT now()")
	if err != nil {
		return time.Time{}, err
	}
	defer rows.Close()
	var now time.Time
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return now, err
		}
		return now, errors.New("no row")
	}
	if err := rows.Scan(&now); err != nil {
		return now, err
	}
	return now, rows.Err()
}
