package pgxdriver

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Pgx returns tx as a pgx.Tx, for a library that writes in a transaction
// through pgx's interface: River (riverpgxv5) inserts its jobs with it in
// the transaction that stores an idempotent mutation's result
// (idemoutbox). Its statements run on tx as ent's do, with what is queued
// and BEGIN travelling ahead of the first. The transaction stays its
// owner's: Commit, Rollback, Begin (a savepoint), CopyFrom, SendBatch,
// Prepare and LargeObjects return an error, and Conn returns nil.
func (tx *Tx) Pgx() pgx.Tx { return pgxTx{tx} }

// errNotOwner is the error of what only the transaction's owner may do.
var errNotOwner = errors.New("pgxdriver: this pgx.Tx is a view of a transaction that its owner commits or rolls back; it runs statements only")

type pgxTx struct{ tx *Tx }

func (t pgxTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	args, err := t.described(ctx, args)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	return t.tx.exec(ctx, sql, args)
}

// described returns args for a statement sent by itself, the statement
// described first, when the pool sends parameters without describing
// statements (default_query_exec_mode exec or simple_protocol, behind
// PgBouncer): a library's statement (River's) may pass []byte for a jsonb
// parameter, which pgx then sends as bytea. What is queued, and BEGIN, go
// ahead in a round trip of their own.
func (t pgxTx) described(ctx context.Context, args []any) ([]any, error) {
	switch t.tx.d.pool.Config().ConnConfig.DefaultQueryExecMode {
	case pgx.QueryExecModeExec, pgx.QueryExecModeSimpleProtocol:
	default:
		return args, nil
	}
	if err := t.tx.lock(); err != nil {
		return nil, err
	}
	err := t.tx.flush(ctx)
	t.tx.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return append([]any{pgx.QueryExecModeDescribeExec}, args...), nil
}

func (t pgxTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	args, err := t.described(ctx, args)
	if err != nil {
		return nil, err
	}
	r, finish, pb, err := t.tx.query(ctx, sql, args)
	if err != nil {
		return nil, err
	}
	rs, err := newRows(r, finish, t.tx.rowsClosed)
	if err != nil {
		pb.Fail(err)
		return nil, err
	}
	return pgxRows{rs}, nil
}

func (t pgxTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	rs, err := t.Query(ctx, sql, args...)
	return pgxRow{rs: rs, err: err}
}

func (t pgxTx) Begin(context.Context) (pgx.Tx, error) { return nil, errNotOwner }
func (t pgxTx) Commit(context.Context) error          { return errNotOwner }
func (t pgxTx) Rollback(context.Context) error        { return errNotOwner }
func (t pgxTx) CopyFrom(context.Context, pgx.Identifier, []string, pgx.CopyFromSource) (int64, error) {
	return 0, errNotOwner
}
func (t pgxTx) SendBatch(context.Context, *pgx.Batch) pgx.BatchResults { return errBatch{} }
func (t pgxTx) LargeObjects() pgx.LargeObjects                         { return pgx.LargeObjects{} }
func (t pgxTx) Prepare(context.Context, string, string) (*pgconn.StatementDescription, error) {
	return nil, errNotOwner
}
func (t pgxTx) Conn() *pgx.Conn { return nil }

// pgxRows are the rows of rows (which end the round trip and give the
// transaction back) through pgx's interface.
type pgxRows struct{ *rows }

func (r pgxRows) Close() { _ = r.rows.Close() }

// pgxRow is QueryRow's row: the first of the rows, which it then closes.
type pgxRow struct {
	rs  pgx.Rows
	err error
}

func (r pgxRow) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	defer r.rs.Close()
	if !r.rs.Next() {
		if err := r.rs.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := r.rs.Scan(dest...); err != nil {
		return err
	}
	r.rs.Close()
	return r.rs.Err()
}

// errBatch is the result of SendBatch, which the view does not run.
type errBatch struct{}

func (errBatch) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, errNotOwner }
func (errBatch) Query() (pgx.Rows, error)         { return nil, errNotOwner }
func (errBatch) QueryRow() pgx.Row                { return pgxRow{err: errNotOwner} }
func (errBatch) Close() error                     { return errNotOwner }
func (errBatch) Tx() pgx.Tx                       { return nil }
