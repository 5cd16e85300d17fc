package pgxdriver

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	entsql "entgo.io/ent/dialect/sql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/goovo/idem/internal/pgxpipe"
)

// rollbackTimeout bounds the ROLLBACK of a transaction, which is sent even
// when the transaction's context has ended (that is when it is most often
// needed); a connection that does not answer in time is closed.
const rollbackTimeout = 5 * time.Second

// Tx is a transaction of a Driver (ent's dialect.Tx).
//
// It takes a connection from the pool with its first statement, not
// before, and sends BEGIN in the same round trip as that statement.
// Statements the hook's store queues (internal/pgxpipe) travel the same
// way, ahead of the next statement the transaction sends, COMMIT included:
// "SAVEPOINT" before the resolver's first write, the completion's UPDATE
// with COMMIT.
//
// When the context given to BeginTx ends before Commit, the transaction is
// rolled back and its connection returned to the pool, as with
// database/sql. A connection whose state is unknown (a statement cancelled
// in flight, a broken connection) is closed, never reused.
//
// A Tx is safe for concurrent use, but like one connection it runs one
// statement at a time: a statement sent while a query's rows are still
// open fails.
type Tx struct {
	d     *Driver
	ctx   context.Context
	begin string
	stop  func() bool

	mu       sync.Mutex // held while a statement is sent and its result awaited
	conn     *pgxpool.Conn
	begun    bool // BEGIN reached the server: the connection is in the transaction
	rowsOpen bool
	done     bool
	ending   bool        // rollbackLater ended it for its callers; the ROLLBACK is on its way
	over     atomic.Bool // done, for Done, which must not wait for tx.mu
	queue    []*pgxpipe.Queued
	sqlDB    *sql.DB // the database/sql view for QueryContext, made on first use
}

// pipeTx is a Tx as the hook's store sees it (pgxpipe.Tx): Queue,
// Unqueue, RollbackLater and Done are the protocol's, not an
// application's (see pgxpipe.Tx for each).
type pipeTx Tx

var _ pgxpipe.Tx = (*pipeTx)(nil)

func (p *pipeTx) Queue(query string, args ...any) *pgxpipe.Queued {
	return (*Tx)(p).queueStmt(query, args)
}
func (p *pipeTx) Unqueue(q *pgxpipe.Queued) bool { return (*Tx)(p).unqueue(q) }
func (p *pipeTx) RollbackLater() error           { return (*Tx)(p).rollbackLater() }
func (p *pipeTx) Done() bool                     { return (*Tx)(p).over.Load() }

// queueStmt queues a statement that is sent ahead of the transaction's
// next statement (or COMMIT), in the same round trip (pgxpipe.Tx.Queue).
func (tx *Tx) queueStmt(query string, args []any) *pgxpipe.Queued {
	q := &pgxpipe.Queued{Statement: pgxpipe.Statement{SQL: query, Args: args}}
	tx.mu.Lock()
	tx.queue = append(tx.queue, q)
	tx.mu.Unlock()
	return q
}

// unqueue removes q if it has not been sent yet, and reports whether it
// had not (pgxpipe.Tx.Unqueue).
func (tx *Tx) unqueue(q *pgxpipe.Queued) bool {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	i := slices.Index(tx.queue, q)
	if i < 0 {
		return false
	}
	tx.queue = slices.Delete(tx.queue, i, i+1)
	return true
}

// Exec implements dialect.ExecQuerier.
func (tx *Tx) Exec(ctx context.Context, query string, args, v any) error {
	argv, err := argsOf(args)
	if err != nil {
		return err
	}
	tag, err := tx.exec(ctx, query, argv)
	if err != nil {
		return err
	}
	return setResult(v, tag)
}

// ExecContext runs query in the transaction, as database/sql's
// Tx.ExecContext does (ent's sql/execquery feature).
func (tx *Tx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	tag, err := tx.exec(ctx, query, args)
	if err != nil {
		return nil, err
	}
	return result(tag), nil
}

func (tx *Tx) exec(ctx context.Context, query string, args []any) (pgconn.CommandTag, error) {
	if err := tx.lock(); err != nil {
		return pgconn.CommandTag{}, err
	}
	defer tx.mu.Unlock()
	pb := pgxpipe.Take(ctx)
	for try := 0; ; try++ {
		conn, err := tx.connFor(ctx)
		if err != nil {
			pb.Fail(err)
			return pgconn.CommandTag{}, err
		}
		tag, err := exec1(ctx, conn, trip{before: tx.prelude(), pb: pb}, query, args)
		if tx.sent(err, try) {
			continue
		}
		pb.Fail(err)
		return tag, err
	}
}

// Query implements dialect.ExecQuerier; v is an *entsql.Rows.
func (tx *Tx) Query(ctx context.Context, query string, args, v any) error {
	vr, ok := v.(*entsql.Rows)
	if !ok {
		return fmt.Errorf("pgxdriver: invalid type %T, expect *sql.Rows", v)
	}
	argv, err := argsOf(args)
	if err != nil {
		return err
	}
	r, finish, pb, err := tx.query(ctx, query, argv)
	if err != nil {
		return err
	}
	// The rows hold the transaction (rowsOpen) until they end; reading the
	// first row may end them, which takes tx.mu: it is not held here.
	rs, err := newRows(r, finish, tx.rowsClosed)
	if err != nil {
		pb.Fail(err)
		return err
	}
	sr, err := asSQL(ctx, tx.d.rows, rs)
	if err != nil {
		return err
	}
	*vr = entsql.Rows{ColumnScanner: sr}
	return nil
}

// query sends a query and marks the transaction's rows open.
func (tx *Tx) query(ctx context.Context, query string, args []any) (pgx.Rows, func() error, *pgxpipe.Piggyback, error) {
	if err := tx.lock(); err != nil {
		return nil, nil, nil, err
	}
	defer tx.mu.Unlock()
	pb := pgxpipe.Take(ctx)
	for try := 0; ; try++ {
		conn, err := tx.connFor(ctx)
		if err != nil {
			pb.Fail(err)
			return nil, nil, nil, err
		}
		r, finish, err := query1(ctx, conn, trip{before: tx.prelude(), pb: pb}, query, args)
		if tx.sent(err, try) {
			continue
		}
		if err != nil {
			pb.Fail(err)
			return nil, nil, nil, err
		}
		tx.rowsOpen = true
		return r, finish, pb, nil
	}
}

// QueryContext runs query in the transaction and returns database/sql
// rows, as database/sql's Tx.QueryContext does (ent's sql/execquery
// feature; the hook's sweeper and idempartition.ByTenant use it). The
// rows come from the transaction's connection through a small database/sql
// driver of this package, with the values pgx's own database/sql driver
// would give.
func (tx *Tx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if err := tx.lock(); err != nil {
		return nil, err
	}
	if err := tx.flush(ctx); err != nil {
		tx.mu.Unlock()
		return nil, err
	}
	if tx.sqlDB == nil {
		tx.sqlDB = sql.OpenDB(sqlConnector{tx: tx})
	}
	db := tx.sqlDB
	tx.rowsOpen = true // until database/sql closes the driver's rows
	tx.mu.Unlock()
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		tx.rowsClosed()
		return nil, err
	}
	return rows, nil
}

// SendBatch sends b in the transaction, after the statements queued (and
// BEGIN, if it has not been sent), in one round trip, and reads every
// result, calling b's callbacks; it returns the first error, a
// statement's or a callback's.
func (tx *Tx) SendBatch(ctx context.Context, b *pgx.Batch) error {
	if err := tx.lock(); err != nil {
		return err
	}
	defer tx.mu.Unlock()
	for try := 0; ; try++ {
		conn, err := tx.connFor(ctx)
		if err != nil {
			return err
		}
		all := &pgx.Batch{}
		for _, s := range tx.prelude() {
			all.Queue(s.SQL, s.Args...)
		}
		all.QueuedQueries = append(all.QueuedQueries, b.QueuedQueries...)
		err = conn.SendBatch(ctx, all).Close()
		if tx.sent(err, try) {
			continue
		}
		return err
	}
}

// Commit commits the transaction, sending the queued statements and
// COMMIT in one round trip. If one of the queued statements fails, COMMIT
// does not run: the transaction is rolled back and Commit returns that
// statement's error. It returns pgx.ErrTxCommitRollback when PostgreSQL
// answered COMMIT with a rollback (an earlier statement had failed), and
// the context's error, after rolling back, when the context given to
// BeginTx has ended. A transaction that sent nothing commits without a
// round trip.
func (tx *Tx) Commit() error {
	if err := tx.lock(); err != nil {
		return err
	}
	defer tx.mu.Unlock()
	if err := tx.ctx.Err(); err != nil {
		tx.rollback()
		return err
	}
	if !tx.begun && len(tx.queue) == 0 {
		tx.finish()
		return nil
	}
	conn, err := tx.connFor(tx.ctx)
	if err != nil {
		tx.finish()
		return err
	}
	tag, err := exec1(tx.ctx, conn, trip{before: tx.prelude()}, "commit", nil)
	tx.begun, tx.queue = true, nil
	if err != nil {
		tx.rollback()
		return err
	}
	tx.finish()
	if tag.String() == "ROLLBACK" {
		return pgx.ErrTxCommitRollback
	}
	return nil
}

// Rollback rolls the transaction back and drops the statements queued. It
// returns sql.ErrTxDone if the transaction is over (committed, rolled
// back, or rolled back because its context ended).
func (tx *Tx) Rollback() error {
	if err := tx.lock(); err != nil {
		return err
	}
	defer tx.mu.Unlock()
	return tx.rollback()
}

// rollbackLater ends the transaction for its callers at once, and rolls
// it back in the background (pgxpipe.Tx.RollbackLater).
func (tx *Tx) rollbackLater() error {
	if err := tx.lock(); err != nil {
		return err
	}
	tx.ending = true
	tx.over.Store(true)
	tx.mu.Unlock()
	go func() {
		tx.mu.Lock()
		defer tx.mu.Unlock()
		_ = tx.rollback()
	}()
	return nil
}

// lock takes the transaction for one operation; it fails when the
// transaction is over (or ending: rollbackLater) or a query's rows are
// open.
func (tx *Tx) lock() error {
	tx.mu.Lock()
	switch {
	case tx.done || tx.ending:
		tx.mu.Unlock()
		return sql.ErrTxDone
	case tx.rowsOpen:
		tx.mu.Unlock()
		return errBusy
	}
	return nil
}

// connFor returns the transaction's connection, taking one from the pool
// (waiting under ctx) on first use.
func (tx *Tx) connFor(ctx context.Context) (*pgx.Conn, error) {
	if tx.conn == nil {
		c, err := tx.d.pool.Acquire(ctx)
		if err != nil {
			return nil, err
		}
		tx.conn = c
	}
	return tx.conn.Conn(), nil
}

// prelude returns what must precede the next statement: BEGIN, if it has
// not been sent, and the queued statements.
func (tx *Tx) prelude() []pgxpipe.Statement {
	var ss []pgxpipe.Statement
	if !tx.begun {
		ss = append(ss, pgxpipe.Statement{SQL: tx.begin})
	}
	for _, q := range tx.queue {
		ss = append(ss, q.Statement)
	}
	return ss
}

// sent records what a round trip that ended with err did to the
// transaction, and reports whether to send it again: when its connection
// turned out dead before anything of the transaction reached the server,
// the round trip is retried on another connection.
func (tx *Tx) sent(err error, try int) (again bool) {
	c := tx.conn.Conn()
	switch {
	case err == nil:
	case c.IsClosed():
		if !tx.begun && retry(err, try) {
			tx.conn.Release() // destroyed: it is closed
			tx.conn = nil
			return true
		}
	case c.PgConn().TxStatus() == 'I':
		// Nothing ran (a statement that could not be prepared, say): BEGIN
		// and the queue wait for the next statement.
		return false
	}
	tx.begun, tx.queue = true, nil
	return false
}

// flush sends BEGIN and the queued statements now, if any wait.
func (tx *Tx) flush(ctx context.Context) error {
	if tx.begun && len(tx.queue) == 0 {
		return nil
	}
	for try := 0; ; try++ {
		conn, err := tx.connFor(ctx)
		if err != nil {
			return err
		}
		b := &pgx.Batch{}
		for _, s := range tx.prelude() {
			b.Queue(s.SQL, s.Args...)
		}
		err = conn.SendBatch(ctx, b).Close()
		if tx.sent(err, try) {
			continue
		}
		return err
	}
}

// rowsClosed ends the query whose rows were open, and finishes a rollback
// that its context's end asked for meanwhile.
func (tx *Tx) rowsClosed() {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	tx.rowsOpen = false
	if tx.ctx.Err() != nil && !tx.done {
		tx.rollback()
	}
}

// cancelled runs when the transaction's context ends: as database/sql
// does, it rolls back a transaction that is still open, unless a query's
// rows are open, in which case closing them does.
func (tx *Tx) cancelled() {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	if tx.done || tx.rowsOpen {
		return
	}
	tx.rollback()
}

// rollback sends ROLLBACK if the transaction reached the server, and ends
// the transaction. It runs with tx.mu held.
func (tx *Tx) rollback() error {
	defer tx.finish()
	if tx.conn == nil || !tx.begun {
		return nil
	}
	c := tx.conn.Conn()
	if c.IsClosed() || c.PgConn().TxStatus() == 'I' {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(tx.ctx), rollbackTimeout)
	defer cancel()
	// If ROLLBACK fails, pgx closes the connection or leaves it in a
	// transaction; the pool destroys such a connection on release.
	_, err := c.Exec(ctx, "rollback")
	return err
}

// finish ends the transaction and gives its connection back to the pool,
// which destroys it unless it is idle and outside any transaction.
func (tx *Tx) finish() {
	if tx.done {
		return
	}
	tx.done = true
	tx.over.Store(true)
	tx.queue = nil
	tx.stop()
	if tx.sqlDB != nil {
		_ = tx.sqlDB.Close()
	}
	if tx.conn != nil {
		tx.conn.Release()
		tx.conn = nil
	}
}
