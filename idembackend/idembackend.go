// Package idembackend is the API between the idempotency hook and the code
// idemgen generates into an ent package (its idem_*.go files): the Backend
// that client.IdempotencyBackend() returns, the record tables it lists, the
// claim a record table's insert receives and the row it hands back.
//
// Applications do not import it: they pass client.IdempotencyBackend() to
// idem.Config.Backend, and their resolvers read the claim with
// idem.ClaimFromContext and its row with the generated ent.Claimed<T>. It
// is public because generated code lives in the application's module.
package idembackend

import (
	"context"
	"database/sql"
	"time"

	"github.com/goovo/idem/idemcode"
)

// Backend connects the hook to the ent client whose tables hold the records.
// The idemgen extension generates one for every ent package that uses the
// mixin:
//
//	backend := client.IdempotencyBackend()
//
// Applications do not implement it.
type Backend interface {
	// Dialect is the ent dialect name: "postgres", "sqlite3" or "mysql".
	Dialect() string
	// DB runs statements outside any transaction; each commits by itself.
	DB() Executor
	// BeginTx starts the transaction in which the resolver's writes and the
	// stored result commit together. The returned context carries an ent
	// client bound to the transaction (ent.FromContext).
	BeginTx(ctx context.Context) (context.Context, Tx, error)
	// Records returns the record table of the named ent type.
	Records(entity string) (*RecordTable, bool)
	// RecordTables lists every record table of the ent package.
	RecordTables() []*RecordTable
	// ArchiveTable is the table of the package's idemschema.Archive entity,
	// where the sweeper moves expired responses; "" when there is none.
	ArchiveTable() string
}

// Executor runs SQL: *sql.DB, *sql.Tx, or an ent client or transaction
// (with ent's sql/execquery feature).
type Executor interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// Tx is a transaction started by Backend.BeginTx: the resolver's writes and
// the stored result commit in one.
type Tx interface {
	Executor
	Commit() error
	Rollback() error
}

// RecordTable describes the table of an ent type that carries the mixin:
// where its records are, and how its claim is inserted.
type RecordTable struct {
	// Entity is the ent type name ("Payment").
	Entity string
	// Table is its SQL table ("payments").
	Table string
	// ScopeColumn is the column that holds the tenant.
	ScopeColumn string
	// IDColumn is the table's primary key column.
	IDColumn string
	// Retention overrides idem.Config.Retention for these records; 0 keeps
	// it.
	Retention time.Duration
	// RecordOnly reports that the entity holds nothing but records
	// (idemschema.Record): the sweeper deletes its purged tombstones,
	// where a business row only forgets its key.
	RecordOnly bool
	// Insert claims c.Key by inserting a new row, built from the mutation's
	// arguments, with INSERT … ON CONFLICT DO NOTHING; it reports false when
	// the key is already taken, and hands the row it inserted to c.SetRow.
	// tx is the mutation's transaction in atomic mode and nil in lease
	// mode, where the claim commits by itself. Without a key (c.Key is "":
	// a call without one while the key is optional) it inserts an ordinary
	// row. An error caused by the arguments is an *InputError.
	Insert func(ctx context.Context, tx Tx, c *Claim, args map[string]any) (inserted bool, err error)
	// Prepare builds the row Insert would insert for c (defaults, hooks,
	// validators), without a statement, hands it to c.SetRow and returns
	// it, for a claim born completed (see Prepared). It returns nil when
	// this row cannot be born completed (its id is not the database's
	// integer sequence, an edge is stored outside the row, the dialect is
	// neither PostgreSQL nor SQLite). Nil for tables generated before it.
	Prepare func(ctx context.Context, c *Claim, args map[string]any) (*Prepared, error)
}

// InputError is an error of a record insert caused by the mutation's input
// (an ent validator or constraint): the client gets BAD_USER_INPUT with
// Message, which must not contain database text, and the key is not spent.
type InputError struct {
	// Message is what the client reads.
	Message string
	// Err is the cause, for the log.
	Err error
}

// Error implements error.
func (e *InputError) Error() string { return e.Message + ": " + e.Err.Error() }

// Unwrap returns the cause.
func (e *InputError) Unwrap() error { return e.Err }

// ClientError is implemented by the errors of a generated ent package that
// a resolver's request caused and would meet again, ent's NotFoundError and
// ConstraintError: the hook makes a resolver's error of this kind final
// (stored and replayed; idem.Retryable overrides it), and its presenter
// answers it with IdempotencyClientError's code and message, never the
// error's text, which may quote the database.
type ClientError interface {
	error
	// IdempotencyClientError returns what the client reads: NotFound's or
	// ConstraintFailed's.
	IdempotencyClientError() (code, message string)
}

// NotFound is the code and message of an ent NotFoundError of the entity
// labelled label ("book").
func NotFound(label string) (code, message string) {
	return string(idemcode.NotFound), label + " not found"
}

// ConstraintFailed is the code and message of an ent ConstraintError,
// whose own text quotes the database.
func ConstraintFailed() (code, message string) {
	return string(idemcode.BadUserInput), "the input breaks a constraint of the data (a value that must be unique is taken, or a record it refers to does not exist)"
}
