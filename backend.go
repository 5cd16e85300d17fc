package idem

import (
	"context"
	"time"

	"github.com/goovo/idem/internal/store"
)

// Backend connects the hook to the ent client whose tables hold the records.
// The idemgen extension generates one for every ent package that uses the
// mixin:
//
//	backend := client.IdempotencyBackend()
//
// Applications do not implement it.
type Backend interface {
	// Dialect is the ent dialect name: "postgres" or "sqlite3".
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

// Executor runs SQL: the shape shared by *sql.DB, *sql.Tx and the ent
// client with the sql/execquery feature:
//
//	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
//	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
type Executor = store.Executor

// Tx is a transaction started by Backend.BeginTx: an Executor with
// Commit() error and Rollback() error.
type Tx = store.Tx

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
	// Retention overrides Config.Retention for these records; 0 keeps it.
	Retention time.Duration
	// RecordOnly reports that the entity holds nothing but records
	// (idemschema.Record): the sweeper deletes its purged tombstones,
	// where a business row only forgets its key.
	RecordOnly bool
	// Insert claims c.Key by inserting a new row, built from the mutation's
	// arguments, with INSERT … ON CONFLICT DO NOTHING; it reports false when
	// the key is already taken. tx is the mutation's transaction in atomic
	// mode and nil in lease mode, where the claim commits by itself.
	Insert func(ctx context.Context, tx Tx, c *Claim, args map[string]any) (inserted bool, err error)
}

// Records is the former name of RecordTable.
//
// Deprecated: use RecordTable; generated code of earlier versions names
// this one.
type Records = RecordTable

// storeTable is where the store finds the records of t.
func (t *RecordTable) storeTable() store.Table {
	return store.Table{Name: t.Table, Scope: t.ScopeColumn, ID: t.IDColumn}
}

// openStore returns the store driver of cfg.Backend's dialect, its clock
// moved by cfg.Clock.
func openStore(cfg Config) (store.Driver, error) {
	return store.Open(cfg.Backend.Dialect(), cfg.Backend, store.Options{Offset: cfg.Clock.Offset})
}
