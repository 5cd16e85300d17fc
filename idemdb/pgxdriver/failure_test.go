package pgxdriver_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/goovo/idem/ent"
	"github.com/goovo/idem/ent/order"
	"github.com/goovo/idem/internal/pgxpipe"
	"github.com/goovo/idem/internal/testkit"
)

func newOrder(ctx context.Context, c *ent.Client, amount int) (*ent.Order, error) {
	return c.Order.Create().SetTenantID("t").SetAmount(amount).SetCurrency("EUR").SetIdempotencyAttempt(1).Save(ctx)
}

// count returns how many orders of amount database/sql sees.
func (e *env) count(amount int) int {
	e.t.Helper()
	n, err := e.std.Order.Query().Where(order.Amount(amount)).Count(context.Background())
	must(e.t, err)
	return n
}

// idle waits until the pool has no connection in use (a transaction gives
// its connection back asynchronously when its context ends) and returns
// the number of connections it keeps.
func (e *env) idle() int {
	e.t.Helper()
	testkit.Eventually(e.t, func() bool { return e.drv.Pool().Stat().AcquiredConns() == 0 }, "no connection in use")
	return int(e.drv.Pool().Stat().IdleConns())
}

// TestFencedCompletionRollsBack: a completion queued with COMMIT that
// finds its attempt fenced out fails by itself, so COMMIT never runs, the
// business writes are rolled back, and the connection is reused.
func TestFencedCompletionRollsBack(t *testing.T) {
	e := newEnv(t, oneConn)
	ctx := context.Background()
	var ptx pgxpipe.Tx
	tx, err := e.client.Tx(pgxpipe.CaptureTx(ctx, &ptx))
	must(t, err)
	o, err := newOrder(ctx, tx.Client(), 501)
	must(t, err)
	ptx.Queue(complete, o.ID, 2) // attempt 2 is not the row's: fenced out
	err = tx.Commit()
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "22P02" || !strings.Contains(pgErr.Message, "fenced out: 0") {
		t.Fatalf("commit of a fenced-out completion: %v, want the completion's own error", err)
	}
	if n := e.count(501); n != 0 {
		t.Errorf("the fenced-out attempt's write committed")
	}
	if n := e.idle(); n != 1 {
		t.Errorf("%d idle connections after the rollback, want the one connection back", n)
	}
	// The same, completing the right attempt, commits.
	tx, err = e.client.Tx(pgxpipe.CaptureTx(ctx, &ptx))
	must(t, err)
	o, err = newOrder(ctx, tx.Client(), 502)
	must(t, err)
	ptx.Queue(complete, o.ID, 1)
	must(t, tx.Commit())
	if n := e.count(502); n != 1 {
		t.Errorf("the completed attempt's write is missing")
	}
}

// TestQueuedAndPiggybackedStatementsFailWithTheirStatement: statements
// that travel with another succeed or fail with it.
func TestQueuedAndPiggybackedStatementsFailWithTheirStatement(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	var ptx pgxpipe.Tx
	tx, err := e.client.Tx(pgxpipe.CaptureTx(ctx, &ptx))
	must(t, err)
	ptx.Queue("SELECT 1/0")
	if _, err := newOrder(ctx, tx.Client(), 601); err == nil || !strings.Contains(err.Error(), "division by zero") {
		t.Errorf("statement behind a failing queued one: %v, want the queued one's error", err)
	}
	if err := tx.Commit(); !errors.Is(err, pgx.ErrTxCommitRollback) {
		t.Errorf("commit of the aborted transaction: %v, want pgx.ErrTxCommitRollback", err)
	}

	// Unqueue drops a statement that was not sent yet.
	tx, err = e.client.Tx(pgxpipe.CaptureTx(ctx, &ptx))
	must(t, err)
	q := ptx.Queue("SELECT 1/0")
	if !ptx.Unqueue(q) || ptx.Unqueue(q) {
		t.Error("Unqueue: want true, then false")
	}
	_, err = newOrder(ctx, tx.Client(), 602)
	must(t, err)
	must(t, tx.Commit())

	// Outside a transaction a statement and its piggyback are one
	// implicit transaction: a piggyback that fails undoes the statement.
	after := &pgx.Batch{}
	after.Queue("SELECT 1/0")
	pb := &pgxpipe.Piggyback{After: after}
	if _, err := newOrder(pgxpipe.With(ctx, pb), e.client, 603); err == nil || pb.Err() == nil {
		t.Errorf("insert with a failing piggyback: %v (piggyback %v), want the piggyback's error", err, pb.Err())
	}
	if n := e.count(603); n != 0 {
		t.Errorf("the insert whose piggyback failed committed")
	}
	// A piggyback travels once; a callback's error is the caller's and
	// undoes nothing.
	after = &pgx.Batch{}
	after.Queue("SELECT 1").Exec(func(pgconn.CommandTag) error { return errors.New("callback") })
	pb = &pgxpipe.Piggyback{Before: []pgxpipe.Statement{{SQL: "SET LOCAL lock_timeout = '1s'"}}, After: after}
	pctx := pgxpipe.With(ctx, pb)
	if _, err := newOrder(pctx, e.client, 604); err != nil || pb.Err() == nil || pb.Err().Error() != "callback" {
		t.Errorf("insert with a failing callback: %v (piggyback %v), want success and the callback's error", err, pb.Err())
	}
	if _, err := newOrder(pctx, e.client, 604); err != nil || !pb.Sent() || e.count(604) != 2 {
		t.Errorf("second insert under the piggyback's context: %v", err)
	}
}

// TestCancelledTransaction: a transaction whose context ends is rolled
// back; its connection goes back to the pool if ROLLBACK got through, and
// is closed if a statement was cut off in flight (its state unknown).
func TestCancelledTransaction(t *testing.T) {
	e := newEnv(t, oneConn)
	ctx := context.Background()

	// Cancelled between statements: rolled back at once, connection kept.
	tctx, cancel := context.WithCancel(ctx)
	tx, err := e.client.Tx(tctx)
	must(t, err)
	_, err = newOrder(tctx, tx.Client(), 701)
	must(t, err)
	pid := backendPID(t, e, tx)
	cancel()
	if n := e.idle(); n != 1 {
		t.Fatalf("%d idle connections after the cancellation, want 1", n)
	}
	if err := tx.Commit(); err == nil {
		t.Error("commit after the cancellation succeeded")
	}
	if e.count(701) != 0 {
		t.Error("the cancelled transaction's write committed")
	}
	if backendPID(t, e) != pid {
		t.Error("the connection rolled back cleanly was not reused")
	}

	// Cancelled while a statement runs: the connection is closed.
	tctx, cancel = context.WithCancel(ctx)
	defer cancel()
	tx, err = e.client.Tx(tctx)
	must(t, err)
	_, err = newOrder(tctx, tx.Client(), 702)
	must(t, err)
	pid = backendPID(t, e, tx)
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	if _, err := tx.ExecContext(tctx, "SELECT pg_sleep(60)"); err == nil {
		t.Fatal("cancelled statement succeeded")
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("the cancelled statement took %v (it sleeps a minute)", d)
	}
	e.idle()
	if err := tx.Rollback(); !errors.Is(err, sql.ErrTxDone) {
		t.Errorf("rollback after the cancellation: %v, want sql.ErrTxDone", err)
	}
	if e.count(702) != 0 {
		t.Error("the cancelled transaction's write committed")
	}
	if backendPID(t, e) == pid {
		t.Error("the connection cut off in flight was reused")
	}
}

// TestRollbackLater: the transaction is over for its callers as soon as
// RollbackLater returns, whatever the ROLLBACK's progress: a Commit right
// after it fails, nothing commits, and the connection comes back.
func TestRollbackLater(t *testing.T) {
	e := newEnv(t, oneConn)
	ctx := context.Background()
	var ptx pgxpipe.Tx
	tx, err := e.client.Tx(pgxpipe.CaptureTx(ctx, &ptx))
	must(t, err)
	_, err = newOrder(ctx, tx.Client(), 801)
	must(t, err)
	must(t, ptx.RollbackLater())
	if !ptx.Done() {
		t.Error("Done is false after RollbackLater")
	}
	if err := tx.Commit(); !errors.Is(err, sql.ErrTxDone) {
		t.Errorf("commit after RollbackLater: %v, want sql.ErrTxDone", err)
	}
	if err := ptx.RollbackLater(); !errors.Is(err, sql.ErrTxDone) {
		t.Errorf("RollbackLater twice: %v, want sql.ErrTxDone", err)
	}
	if n := e.idle(); n != 1 {
		t.Errorf("%d idle connections after RollbackLater, want the one connection back", n)
	}
	if e.count(801) != 0 {
		t.Error("the transaction ended by RollbackLater committed its write")
	}
}

// backendPID returns the server process of the pool's (only) connection,
// or of tx's.
func backendPID(t *testing.T, e *env, tx ...*ent.Tx) int {
	t.Helper()
	ctx := context.Background()
	q := e.client.QueryContext
	if len(tx) > 0 {
		q = tx[0].QueryContext
	}
	rows, err := q(ctx, "SELECT pg_backend_pid()")
	must(t, err)
	defer rows.Close()
	var pid int
	if !rows.Next() {
		t.Fatalf("no pid: %v", rows.Err())
	}
	must(t, rows.Scan(&pid))
	return pid
}

// TestBrokenConnection: when the network drops the connection of an open
// transaction, the transaction fails, nothing commits, and the pool goes
// on with new connections.
func TestBrokenConnection(t *testing.T) {
	e := newEnv(t, oneConn)
	ctx := context.Background()
	tx, err := e.client.Tx(ctx)
	must(t, err)
	_, err = newOrder(ctx, tx.Client(), 801)
	must(t, err)
	e.proxy.BreakAll()
	if _, err := newOrder(ctx, tx.Client(), 802); err == nil {
		t.Error("statement on a broken connection succeeded")
	}
	if err := tx.Commit(); err == nil {
		t.Error("commit on a broken connection succeeded")
	}
	if n := e.idle(); n != 0 {
		t.Errorf("%d idle connections, want the broken one gone", n)
	}
	if _, err := newOrder(ctx, e.client, 803); err != nil {
		t.Errorf("statement after the break: %v", err)
	}
	if e.count(801)+e.count(802) != 0 || e.count(803) != 1 {
		t.Error("the broken transaction's writes committed, or the next one's did not")
	}
}

// TestRestart: PostgreSQL going down terminates every backend (FATAL
// 57P01, as a restart does) and refuses connections for a while. Meanwhile
// statements fail within their context instead of hanging, an open
// transaction fails without committing, and once the server is back the
// pool replaces its dead connections by itself.
func TestRestart(t *testing.T) {
	e := newEnv(t, func(cfg *pgxpool.Config) { cfg.MaxConns = 3 })
	ctx := context.Background()
	// Two connections in the pool, one of them in a transaction.
	tx, err := e.client.Tx(ctx)
	must(t, err)
	_, err = newOrder(ctx, tx.Client(), 901)
	must(t, err)
	_, err = newOrder(ctx, e.client, 902)
	must(t, err)

	e.proxy.Refuse(true)
	var terminated int
	must(t, e.db.Driver.DB().QueryRowContext(ctx,
		"SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1", e.app).Scan(&terminated))
	if terminated != 2 {
		t.Fatalf("terminated %d backends, want 2", terminated)
	}
	down := time.Now()
	sctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	_, err = newOrder(sctx, e.client, 903)
	cancel()
	if err == nil {
		t.Error("statement while the server is down succeeded")
	}
	if err := tx.Commit(); err == nil {
		t.Error("commit of a transaction whose server went away succeeded")
	}
	if d := time.Since(down); d > 15*time.Second {
		t.Errorf("failing took %v (the statement's context is 3 s)", d)
	}
	e.idle()

	// Back up. The pool pings a connection that sat idle over a second
	// before handing it out, and replaces a dead one.
	time.Sleep(1200*time.Millisecond - time.Since(down))
	e.proxy.Refuse(false)
	for range 10 {
		if _, err := newOrder(ctx, e.client, 904); err != nil {
			t.Fatalf("statement after the restart: %v", err)
		}
	}
	if e.count(901) != 0 || e.count(903) != 0 || e.count(904) != 10 {
		t.Error("writes of the failed transaction or statement committed, or the later ones are missing")
	}
}

// TestPoolBound: the pool is bounded and a statement waits for a
// connection under its context; the database/sql view shares the bound; a
// transaction takes its connection with its first statement, not before.
func TestPoolBound(t *testing.T) {
	e := newEnv(t, func(cfg *pgxpool.Config) { cfg.MaxConns = 2 })
	ctx := context.Background()
	var txs []*ent.Tx
	for i := range 2 {
		tx, err := e.client.Tx(ctx)
		must(t, err)
		_, err = newOrder(ctx, tx.Client(), 1000+i)
		must(t, err)
		txs = append(txs, tx)
	}
	tx3, err := e.client.Tx(ctx) // takes no connection yet
	must(t, err)
	short := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, 200*time.Millisecond) }
	sctx, cancel := short()
	_, err = newOrder(sctx, tx3.Client(), 1002)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("statement on an exhausted pool: %v, want to wait until the deadline", err)
	}
	sctx, cancel = short()
	err = e.drv.DB().PingContext(sctx)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("database/sql view on an exhausted pool: %v, want to wait until the deadline", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := newOrder(ctx, e.client, 1003)
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	must(t, txs[0].Commit())
	if err := <-done; err != nil {
		t.Errorf("waiting statement: %v", err)
	}
	must(t, txs[1].Rollback())
	must(t, tx3.Rollback())
	if e.count(1000) != 1 || e.count(1001) != 0 || e.count(1003) != 1 {
		t.Error("wrong rows committed")
	}
}

// TestPipelineTransactions pins down the PostgreSQL behaviour the
// pipelined store is designed around: statements sent together outside a
// transaction are one implicit transaction, so SET LOCAL riding ahead of a
// statement applies to that statement alone (a claim committed with
// synchronous_commit off, say); and a BEGIN behind a statement in the same
// round trip pulls that statement into the transaction, so a claim that
// must commit by itself cannot carry the BEGIN of the next transaction.
func TestPipelineTransactions(t *testing.T) {
	e := newEnv(t, oneConn)
	ctx := context.Background()

	var inside string
	after := &pgx.Batch{}
	after.Queue("SELECT current_setting('synchronous_commit')").QueryRow(func(row pgx.Row) error { return row.Scan(&inside) })
	pb := &pgxpipe.Piggyback{Before: []pgxpipe.Statement{{SQL: "SET LOCAL synchronous_commit = off"}}, After: after}
	_, err := newOrder(pgxpipe.With(ctx, pb), e.client, 1101)
	must(t, err)
	must(t, pb.Err())
	var later string
	must(t, e.drv.Pool().QueryRow(ctx, "SELECT current_setting('synchronous_commit')").Scan(&later))
	if inside != "off" || later != "on" || e.count(1101) != 1 {
		t.Errorf("SET LOCAL ahead of an insert: %q with it, %q after it, want off then on", inside, later)
	}

	b := &pgx.Batch{}
	b.Queue("INSERT INTO orders (tenant_id, amount, currency, paid, idempotency_fingerprint, idempotency_attempt) VALUES ('t', 1102, 'EUR', false, '', 1)")
	b.Queue("BEGIN")
	must(t, e.drv.SendBatch(ctx, b)) // the connection, left in a transaction, is destroyed on release
	if n := e.count(1102); n != 0 {
		t.Errorf("an insert followed by BEGIN in one round trip committed by itself")
	}
	if n := e.idle(); n != 0 {
		t.Errorf("%d idle connections: the one left in a transaction went back to the pool", n)
	}
}
