package idemdb

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"modernc.org/sqlite"

	"github.com/goovo/idem/internal/tenancy"
)

// SQLite has one writer at a time, and a writer that finds the database
// locked polls for it (its busy handler sleeps up to 100 ms between tries).
// Polling is not a queue: a tenant whose mutations keep the write lock,
// back to back, wins every race against a poller, which can wait out its
// whole busy timeout and fail (IDEMPOTENCY_UNAVAILABLE) behind writes of
// 100 ms each. So the writers of one process queue for a database file in
// arrival order before they ask SQLite: a write transaction from its BEGIN
// (every BEGIN is IMMEDIATE here) to its end, and a write statement outside
// a transaction for its run. A writer waits at most sqliteBusyTimeout in
// the queue, as SQLite's own timeout would have it, and never longer than
// its context. Other processes on the same file still poll.

// sqliteDriverName is the database/sql driver Resolve names for SQLite:
// modernc.org/sqlite behind the writers' queue.
const sqliteDriverName = "sqlite-idem"

func init() { sql.Register(sqliteDriverName, &queuedDriver{inner: &sqlite.Driver{}}) }

// errWriterQueue is returned when a writer waited out the busy timeout in
// the queue: the database was as locked as SQLITE_BUSY says, and the error
// says so the way modernc.org/sqlite's errors do (Code), so that whoever
// classifies SQLite's errors (the record store) reads it as busy.
var errWriterQueue error = busyError{}

type busyError struct{}

func (busyError) Error() string {
	return fmt.Sprintf("idemdb: the SQLite database stayed locked by other writers of this process for %v (the busy timeout)", sqliteBusyTimeout)
}

// Code is SQLITE_BUSY.
func (busyError) Code() int { return 5 }

// writerQueue is the queue of one database file: a channel of one slot,
// whose blocked senders the Go runtime serves in arrival order.
type writerQueue chan struct{}

var (
	queuesMu sync.Mutex
	queues   = map[string]writerQueue{}
)

// queueFor returns the queue of the file a data source names.
func queueFor(source string) writerQueue {
	file, _, _ := strings.Cut(strings.TrimPrefix(source, "file:"), "?")
	queuesMu.Lock()
	defer queuesMu.Unlock()
	q, ok := queues[file]
	if !ok {
		q = make(writerQueue, 1)
		queues[file] = q
	}
	return q
}

func (q writerQueue) enter(ctx context.Context) error {
	select {
	case q <- struct{}{}:
		return nil
	default:
	}
	t := time.NewTimer(sqliteBusyTimeout)
	defer t.Stop()
	select {
	case q <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return errWriterQueue
	}
}

func (q writerQueue) leave() { <-q }

type queuedDriver struct{ inner *sqlite.Driver }

func (d *queuedDriver) Open(source string) (driver.Conn, error) {
	c, err := d.inner.Open(source)
	if err != nil {
		return nil, err
	}
	inner, ok := c.(innerConn)
	if !ok {
		c.Close()
		return nil, errors.New("idemdb: a modernc.org/sqlite connection lacks an interface the writers' queue needs")
	}
	return &queuedConn{inner: inner, queue: queueFor(source)}, nil
}

// innerConn is what modernc.org/sqlite's connections implement and the
// wrapper passes on.
type innerConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.QueryerContext
	driver.Pinger
	driver.SessionResetter
	driver.Validator
}

// queuedConn is a connection whose write transactions and write statements
// take their turn in the file's queue.
type queuedConn struct {
	inner innerConn
	queue writerQueue
	inTx  bool // this connection holds the queue for a transaction
}

var (
	_ driver.ConnBeginTx        = (*queuedConn)(nil)
	_ driver.ConnPrepareContext = (*queuedConn)(nil)
	_ driver.ExecerContext      = (*queuedConn)(nil)
	_ driver.QueryerContext     = (*queuedConn)(nil)
	_ driver.Pinger             = (*queuedConn)(nil)
	_ driver.SessionResetter    = (*queuedConn)(nil)
	_ driver.Validator          = (*queuedConn)(nil)
)

func (c *queuedConn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

func (c *queuedConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	s, err := c.inner.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	return &queuedStmt{Stmt: s, conn: c, write: writes(query)}, nil
}

func (c *queuedConn) Close() error {
	if c.inTx {
		c.inTx = false
		c.queue.leave()
	}
	return c.inner.Close()
}

func (c *queuedConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

// BeginTx begins a transaction in its turn. Inside the resolver of an
// idempotent mutation (a context with the engine's write guard) it refuses
// at once: the claim's transaction holds this process's turn until the
// mutation ends, so the new one would wait for it until the busy timeout;
// and its writes would commit whether or not the mutation does.
func (c *queuedConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if g := tenancy.GuardOf(ctx); g != nil {
		return nil, g.RefuseTx()
	}
	if err := c.queue.enter(ctx); err != nil {
		return nil, err
	}
	tx, err := c.inner.BeginTx(ctx, opts)
	if err != nil {
		c.queue.leave()
		return nil, err
	}
	c.inTx = true
	return &queuedTx{inner: tx, conn: c}, nil
}

// around runs a statement outside a transaction in its turn if it writes.
func (c *queuedConn) around(ctx context.Context, write bool) (leave func(), err error) {
	if c.inTx || !write {
		return func() {}, nil
	}
	if err := c.queue.enter(ctx); err != nil {
		return nil, err
	}
	return c.queue.leave, nil
}

func (c *queuedConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	leave, err := c.around(ctx, writes(query))
	if err != nil {
		return nil, err
	}
	defer leave()
	return c.inner.ExecContext(ctx, query, args)
}

func (c *queuedConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	leave, err := c.around(ctx, writes(query))
	if err != nil {
		return nil, err
	}
	rows, err := c.inner.QueryContext(ctx, query, args)
	if err != nil {
		leave()
		return nil, err
	}
	// INSERT … RETURNING writes until its rows are closed.
	return &queuedRows{Rows: rows, leave: leave}, nil
}

func (c *queuedConn) Ping(ctx context.Context) error         { return c.inner.Ping(ctx) }
func (c *queuedConn) ResetSession(ctx context.Context) error { return c.inner.ResetSession(ctx) }
func (c *queuedConn) IsValid() bool                          { return c.inner.IsValid() }

type queuedTx struct {
	inner driver.Tx
	conn  *queuedConn
	once  sync.Once
}

func (t *queuedTx) end() {
	t.once.Do(func() {
		if t.conn.inTx {
			t.conn.inTx = false
			t.conn.queue.leave()
		}
	})
}

func (t *queuedTx) Commit() error {
	defer t.end()
	return t.inner.Commit()
}

func (t *queuedTx) Rollback() error {
	defer t.end()
	return t.inner.Rollback()
}

type queuedRows struct {
	driver.Rows
	leave func()
	once  sync.Once
}

func (r *queuedRows) Close() error {
	defer r.once.Do(r.leave)
	return r.Rows.Close()
}

// queuedStmt is a prepared statement that takes its turn when it writes
// outside a transaction.
type queuedStmt struct {
	driver.Stmt
	conn  *queuedConn
	write bool
}

func (s *queuedStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	leave, err := s.conn.around(ctx, s.write)
	if err != nil {
		return nil, err
	}
	defer leave()
	return s.Stmt.(driver.StmtExecContext).ExecContext(ctx, args)
}

func (s *queuedStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	leave, err := s.conn.around(ctx, s.write)
	if err != nil {
		return nil, err
	}
	rows, err := s.Stmt.(driver.StmtQueryContext).QueryContext(ctx, args)
	if err != nil {
		leave()
		return nil, err
	}
	return &queuedRows{Rows: rows, leave: leave}, nil
}

// writes reports whether a statement may write: anything but a SELECT,
// VALUES or EXPLAIN. A WITH may lead to an INSERT: it counts as a write.
func writes(query string) bool {
	q := strings.TrimLeft(query, " \t\r\n(")
	for strings.HasPrefix(q, "--") || strings.HasPrefix(q, "/*") {
		end := "\n"
		if strings.HasPrefix(q, "/*") {
			end = "*/"
		}
		i := strings.Index(q, end)
		if i < 0 {
			return true
		}
		q = strings.TrimLeft(q[i+len(end):], " \t\r\n(")
	}
	word, _, _ := strings.Cut(q, " ")
	switch strings.ToUpper(strings.TrimRight(word, "\t\r\n")) {
	case "SELECT", "VALUES", "EXPLAIN":
		return false
	}
	return true
}
