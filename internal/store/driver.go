// Package store runs the statements of the idempotency records: one
// statement per transition of the state machine, and the batches and reads
// of their administration. Driver is the seam: the engine (internal/engine)
// and the admin (idemctl) call it and know no SQL and no backend; each backend
// implements it in a file of its own (postgres.go, sqlite.go), with all of
// its SQL in one place (mysql.go for MySQL and MariaDB), and translates its driver's errors into *Error,
// whose kinds (ErrUnreachable, ErrBusy, …) callers test with errors.Is, so
// that an outage never reads as an answer.
//
// The calls are cut where a driver that pipelines (pgx's batches) can fold
// round trips: Begin need not send BEGIN until the first statement, Claim
// is the claim and, when the key is taken, its lookup (one call), Savepoint
// can travel with the next statement, and Complete is the fenced UPDATE
// and the COMMIT (with DiscardWrites, the ROLLBACK TO SAVEPOINT too). Each
// maintenance batch is one call that owns its transaction.
package store

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/goovo/idem/idembackend"
	"github.com/goovo/idem/internal/record"
)

// Conn is what a driver runs its statements on: idembackend.Backend,
// which generated code implements, is one.
type Conn interface {
	// DB runs statements outside any transaction; each commits by itself.
	DB() idembackend.Executor
	// BeginTx starts a transaction; the returned context carries what the
	// application's code needs to write in it (an ent client).
	BeginTx(ctx context.Context) (context.Context, idembackend.Tx, error)
}

// Driver runs the record statements of one backend. It is safe for
// concurrent use.
type Driver interface {
	Protocol
	Maintenance
}

// Protocol is what a request needs: every transition of a record is one
// fenced statement, made by exactly one of any number of concurrent
// callers.
type Protocol interface {
	// Traits says where the protocol must adapt to the backend.
	Traits() Traits
	// Now reads the database clock, or returns a recent reading.
	Now(ctx context.Context) (Reading, error)
	// Lookup reads the record of ref, with the database clock. The record
	// is nil when the key is unknown.
	Lookup(ctx context.Context, ref Ref) (*record.Record, Reading, error)
	// Begin starts the transaction of an attempt: the claim (in atomic
	// mode), the resolver's writes and the result commit in it.
	Begin(ctx context.Context) (context.Context, idembackend.Tx, error)
	// Claim claims a key with c.Insert, in c.Tx or, when c.Tx is nil, in a
	// statement that commits by itself. When the key is taken, the result
	// carries the record that holds it, read after the insert, so that a
	// caller that lost the race goes on without another lookup. A claim
	// that does not win (taken, or failed) rolls c.Tx back: it holds
	// nothing worth keeping.
	Claim(ctx context.Context, c Claim) (Claimed, error)
	// Savepoint marks, in tx, the end of the claim and the start of the
	// resolver's writes, which Complete with DiscardWrites undoes.
	Savepoint(ctx context.Context, tx idembackend.Tx) error
	// TakeOver gives a pending record whose lease has run out to a new
	// attempt. It reports false when someone else changed the record first.
	TakeOver(ctx context.Context, t TakeOver) (bool, error)
	// Renew extends the lease of an attempt while it runs. It reports false
	// when the attempt no longer holds the claim.
	Renew(ctx context.Context, l Lease) (bool, error)
	// Release ends the lease of an attempt that will not complete, so that
	// the next request with the key takes the claim over at once.
	Release(ctx context.Context, l Lease) error
	// Complete stores the result of an attempt, only while the attempt
	// still owns the pending record, and commits tx. With a nil tx the
	// statement commits by itself. It reports false when the attempt lost
	// its claim, and then tx is rolled back.
	Complete(ctx context.Context, tx idembackend.Tx, c Completion) (bool, error)
}

// Maintenance is what the sweeper and operators need. Each batch runs in a
// transaction of its own, selects its rows through one of the mixin's
// partial indexes (so that its cost follows the rows it moves), and on
// backends that can, skips rows another sweeper holds.
type Maintenance interface {
	// Ping checks that the database can be reached.
	Ping(ctx context.Context) error
	// ArchiveBatch moves the responses of finished records past retention
	// to the archive table and leaves tombstones. It returns how many
	// records it moved (or, with DryRun, would move).
	ArchiveBatch(ctx context.Context, b ArchiveBatch) (int, error)
	// Promised counts the finished records that q's cutoff would archive
	// but whose answers promised them for longer (ArchiveBatch keeps
	// them), and the latest of those promises: a sweeper given a shorter
	// retention than the server that answered.
	Promised(ctx context.Context, q PromisedQuery) (n int, until time.Time, err error)
	// PurgeBatch forgets the keys of tombstones past the horizon.
	PurgeBatch(ctx context.Context, b PurgeBatch) (int, error)
	// PurgeAbandoned deletes claims abandoned in pending past the horizon.
	PurgeAbandoned(ctx context.Context, b AbandonedBatch) (int, error)
	// Stats counts the records of a table by state.
	Stats(ctx context.Context, t Table) (TableStats, error)
	// ArchiveStats counts the archive's rows and the bytes of their
	// responses.
	ArchiveStats(ctx context.Context, archive string) (rows, bytes int64, err error)
	// Stuck lists pending records whose lease ended long ago, oldest first.
	Stuck(ctx context.Context, q StuckQuery) ([]Row, error)
	// Abandoned lists the recoverer's turn of pending claims whose lease
	// ended before q.LeaseEndedBefore, with what it needs to take each
	// over and run it again: fairly, every tenant's oldest claim before
	// any tenant's second (see AbandonedQuery).
	Abandoned(ctx context.Context, q AbandonedQuery) ([]AbandonedClaim, error)
	// Requeue moves an abandoned claim the recoverer did not run to the
	// back of its list: the claim's lease ends again at r.Now, so that it
	// is listed after every claim abandoned before, once its new lease end
	// is past the recoverer's cutoff. The lease stays ended, so its
	// client's retry still takes it over at once. Fenced like a takeover:
	// it reports false, and changes nothing, when another attempt holds
	// the claim or its lease was renewed since it was listed.
	Requeue(ctx context.Context, r Requeue) (bool, error)
	// Failed lists failed records that still hold their response, newest
	// first.
	Failed(ctx context.Context, q FailedQuery) ([]Row, error)
	// Completed lists finished records that still hold their response,
	// completed at or after q.Since, newest first.
	Completed(ctx context.Context, q CompletedQuery) ([]Row, error)
	// Find returns the record of a key and its archived versions.
	Find(ctx context.Context, q FindQuery) ([]Row, error)
}

// Traits are the backend's differences the protocol adapts to.
type Traits struct {
	// ClaimFirst: a claim's insert doubles as its lookup, so a request
	// claims before it looks: a new key (the common case) costs one
	// statement, and a duplicate's insert returns at once. Not on SQLite,
	// where a duplicate's insert would wait for the single write lock,
	// which the first attempt holds until it commits, while a lookup (a
	// read) answers at once.
	ClaimFirst bool
	// RenewLeases: a live attempt's lease must be renewed while its
	// resolver runs, or a retry would take a live claim over. Not on
	// SQLite, where a live attempt holds the write lock that a takeover
	// needs: only a dead attempt's claim can be taken over.
	RenewLeases bool
}

// Options configure a driver.
type Options struct {
	// Offset, when not nil, is added to every reading of the database
	// clock (tests move it forward to expire leases and records).
	Offset func() time.Duration
}

// drivers are the backends, by ent dialect name.
var drivers = map[string]func(Conn, Options) Driver{
	"postgres": newPostgres,
	"sqlite3":  newSQLite,
	"mysql":    newMySQL,
}

// Open returns the driver of an ent dialect ("postgres", "sqlite3" or
// "mysql": MySQL and MariaDB) over conn.
func Open(dialect string, conn Conn, opts Options) (Driver, error) {
	newDriver, ok := drivers[dialect]
	if !ok {
		names := make([]string, 0, len(drivers))
		for n := range drivers {
			names = append(names, fmt.Sprintf("%q", n))
		}
		sort.Strings(names)
		return nil, fmt.Errorf("idempotency store: unsupported dialect %q (want %s)", dialect, strings.Join(names, " or "))
	}
	if opts.Offset == nil {
		opts.Offset = func() time.Duration { return 0 }
	}
	return newDriver(conn, opts), nil
}

// Table names a record table, its scope column and its primary key.
type Table struct {
	Name  string
	Scope string
	ID    string
}

// TableOf is where the store finds the records of t.
func TableOf(t *idembackend.RecordTable) Table {
	return Table{Name: t.Table, Scope: t.ScopeColumn, ID: t.IDColumn}
}

// RetentionOf is the retention window of the records of t: its own, or
// def (idem.Config.Retention).
func RetentionOf(t *idembackend.RecordTable, def time.Duration) time.Duration {
	if t.Retention > 0 {
		return t.Retention
	}
	return def
}

// Ref names one record: its table and its (tenant, key).
type Ref struct {
	Table  Table
	Tenant string
	Key    string
}

// ID names the record in one string, for the hook's in-memory maps.
func (r Ref) ID() string { return r.Table.Name + "\x00" + r.Tenant + "\x00" + r.Key }

// Claim is a claim to make.
type Claim struct {
	Ref Ref
	// Tx is the attempt's transaction in atomic mode; nil in lease mode,
	// where the claim commits by itself.
	Tx idembackend.Tx
	// Insert inserts the claim's row, with INSERT … ON CONFLICT DO
	// NOTHING: generated code, which builds the row from the mutation's
	// arguments. It reports false when the key is taken.
	Insert func(ctx context.Context, tx idembackend.Tx) (inserted bool, err error)
}

// Claimed is the outcome of a claim.
type Claimed struct {
	// Won: this claim inserted the record.
	Won bool
	// Holder is the record that holds the key when the claim lost (nil if
	// it was gone again by the time it was read), and Reading the database
	// clock of that read.
	Holder  *record.Record
	Reading Reading
}

// TakeOver is a takeover of an expired claim.
type TakeOver struct {
	Ref Ref
	// Attempt is the attempt the caller saw holding the record: the
	// takeover makes Attempt+1, and fails if another took over first.
	Attempt int
	// Now is the database time the lease must have run out by.
	Now time.Time
	// LeaseUntil is the new attempt's lease.
	LeaseUntil time.Time
}

// Lease is a change of an attempt's lease: a renewal, or a release (Until
// is now).
type Lease struct {
	Ref     Ref
	Attempt int
	Until   time.Time
}

// Completion is the result of an attempt.
type Completion struct {
	Ref     Ref
	Attempt int
	// Status is record.StatusSucceeded or record.StatusFailed.
	Status   string
	Response []byte
	At       time.Time
	// ExpiresAt is until when the result is replayed: At plus the
	// retention that the answer's expiresAt promised. It is stored in the
	// record's lease column (a finished record holds its key until then)
	// and every sweeper honours it, whatever retention it was given. Zero
	// stores none: sweepers then go by their own retention.
	ExpiresAt time.Time
	// DiscardWrites undoes the resolver's writes (back to the Savepoint)
	// before storing the result: atomic mode's final failure.
	DiscardWrites bool
}

// ArchiveBatch selects up to Limit records of Table that completed before
// CompletedBefore, not before CompletedSince, and whose fingerprint begins
// with FingerprintPrefix, to move to Archive. The zero CompletedSince and
// an empty FingerprintPrefix select every record completed before
// CompletedBefore.
type ArchiveBatch struct {
	Table           Table
	Archive         string
	CompletedBefore time.Time
	// CompletedSince and FingerprintPrefix (fingerprint.Prefix) select the
	// records of one mutation whose retention is shorter than its table's,
	// in the band that the table's own batches do not take.
	CompletedSince    time.Time
	FingerprintPrefix string
	// Now is the archive time stamped on the tombstones.
	Now   time.Time
	Limit int
	// DryRun counts what the batch would move (all of it, not a batch)
	// and changes nothing.
	DryRun bool
}

// PromisedQuery selects the records of Table completed before
// CompletedBefore whose promised expiry is after Now.
type PromisedQuery struct {
	Table           Table
	CompletedBefore time.Time
	Now             time.Time
}

// PurgeBatch selects up to Limit tombstones of Table archived before
// ArchivedBefore. Rows that are nothing but records (RecordOnly), and
// failed claims, are deleted; a succeeded business row stays, without its
// idempotency columns, like a row created without a key.
type PurgeBatch struct {
	Table          Table
	RecordOnly     bool
	ArchivedBefore time.Time
	Limit          int
	DryRun         bool
}

// AbandonedBatch selects up to Limit pending claims of Table whose lease
// ended before LeaseEndedBefore: claims whose worker died and whose client
// never came back. Such a row is a claim, never a business fact.
type AbandonedBatch struct {
	Table            Table
	LeaseEndedBefore time.Time
	Limit            int
	DryRun           bool
}

// TableStats counts the records of one table by state.
type TableStats struct {
	Pending, Succeeded, Failed, Tombstones int64
	// OldestPending is the claim time of the oldest pending record (zero
	// when there is none).
	OldestPending time.Time
}

// Row is one record as operators see it.
type Row struct {
	Table       string
	Tenant      string
	Key         string
	Status      string
	Fingerprint string
	Attempt     int
	Response    []byte
	// Archived rows come from the archive table.
	Archived                                           bool
	LeaseExpiresAt, ClaimedAt, CompletedAt, ArchivedAt time.Time
	// Recoverable: the record keeps an operation the recoverer can run.
	Recoverable bool
}

// StuckQuery selects up to Limit pending records of Table whose lease
// ended before LeaseEndedBefore.
type StuckQuery struct {
	Table            Table
	LeaseEndedBefore time.Time
	Limit            int
}

// AbandonedQuery selects up to Limit pending claims of Table whose lease
// ended before LeaseEndedBefore, in turns: each tenant's claims oldest
// lease end first, and every tenant's n-th claim before any tenant's
// n+1-th, so that no tenant's claims, however many, delay another
// tenant's first one past a round. A claim that kept no operation cannot
// be run: it is listed only once it was claimed before ClaimedBefore (the
// horizon past which the recoverer abandons it), and until then never
// takes a place another claim could have.
type AbandonedQuery struct {
	Table            Table
	LeaseEndedBefore time.Time
	ClaimedBefore    time.Time
	Limit            int
}

// Requeue is the move of an abandoned claim to the back of the
// recoverer's list.
type Requeue struct {
	Ref Ref
	// Attempt is the attempt that held the claim when it was listed.
	Attempt int
	// LeaseEndedBefore is the cutoff it was listed with: a lease renewed
	// since ends after it, and is not moved.
	LeaseEndedBefore time.Time
	// Now is the new end of its lease: the database time now.
	Now time.Time
}

// AbandonedClaim is a pending claim whose lease has run out, as the
// recoverer sees it.
type AbandonedClaim struct {
	Tenant, Key, Fingerprint string
	// Attempt is the attempt that holds the claim: a takeover makes
	// Attempt+1.
	Attempt                   int
	LeaseExpiresAt, ClaimedAt time.Time
	// Operation is what the claim kept to be run again (record.Operation);
	// nil when it kept nothing.
	Operation []byte
}

// FailedQuery selects the newest Limit failed records of Table: of
// Tenant's only when it is not "", completed at or after Since and before
// Until.
type FailedQuery struct {
	Table        Table
	Tenant       string
	Since, Until time.Time
	Limit        int
}

// CompletedQuery selects the newest Limit records of Table completed at or
// after Since that still hold their response.
type CompletedQuery struct {
	Table Table
	Since time.Time
	Limit int
}

// FindQuery selects the record of (Tenant, Key) in Table, and its archived
// versions in Archive ("" for none).
type FindQuery struct {
	Table   Table
	Archive string
	Tenant  string
	Key     string
}

// Reading is a reading of the database clock, advanced by the local
// monotonic clock (which wall-clock steps do not move): every time the
// store writes or compares derives from such a reading, so that expiry is
// decided by the database's time, not by each server's wall clock.
type Reading struct {
	db     time.Time
	read   time.Time
	offset time.Duration
}

// Now returns the database time now.
func (r Reading) Now() time.Time { return r.db.Add(time.Since(r.read) + r.offset).UTC() }

// QuoteIn quotes an SQL identifier as the ent dialect's database reads it.
func QuoteIn(dialect, ident string) string {
	if dialect == "mysql" {
		return mysqlQuote(ident)
	}
	return Quote(ident)
}

// Quote quotes an SQL identifier as PostgreSQL and SQLite do, with double
// quotes (MySQL quotes with backquotes: the driver's own quoting).
func Quote(ident string) string {
	return `"` + strings.ReplaceAll(ident, `"`, `""`) + `"`
}
