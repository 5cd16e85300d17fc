// Package pgxpipe is the seam between the pgx driver (idemdb/pgxdriver)
// and the hook's pipelined store (internal/store), which puts the
// protocol's statements into the round trips of ent's: a transaction's
// queue (the SAVEPOINT with the resolver's first write, the completion's
// UPDATE with COMMIT), a piggyback (the claim's lookup ahead of its
// INSERT), and the capture of the driver's transaction that ent's
// generated client hides. It is internal: what travels in a round trip is
// the protocol's business, not an application's.
package pgxpipe

import (
	"context"
	"sync"

	"github.com/jackc/pgx/v5"
)

// Statement is an SQL statement and its arguments.
type Statement struct {
	SQL  string
	Args []any
}

// Piggyback holds statements that travel in the round trip of the next
// statement the driver sends under a context made by With, on the pool or
// in a transaction: Before are sent ahead of that statement, After behind
// it. It lets code that cannot send a statement itself, such as ent's
// generated code, carry someone else's statements: the claim's INSERT of a
// generated create, built by ent, carries the lookup that reads the key's
// record when the key turns out to be taken.
//
// All of them succeed or fail together with the statement. On the pool
// they run in one implicit transaction: if one fails, none of them
// commits, and the statement reports that error. In a transaction, a
// failure aborts the transaction. The results of Before statements are not
// delivered; those of After statements go to the callbacks of After's
// queued queries (pgx.QueuedQuery.Exec, QueryRow, Query), called once the
// statement's own result has been read.
//
// A Piggyback travels once, with the first statement sent under the
// context; later statements go alone.
//
// First are sent ahead of everything else in the round trip, a
// transaction's BEGIN included, and their results go to the callbacks of
// First's queued queries as they arrive, before the statement's. If one of
// them fails (or its callback returns an error), nothing after it runs:
// on a transaction's first round trip, the transaction is not begun. A
// check that must see the database before a transaction begins, and keep
// it from beginning, goes there.
type Piggyback struct {
	First  *pgx.Batch
	Before []Statement
	After  *pgx.Batch

	mu   sync.Mutex
	sent bool
	err  error
}

// With returns a context under which the next statement the driver sends
// carries p's statements: the next Exec or Query (ent's statements) or
// ExecContext; QueryContext, which goes through database/sql, does not
// carry it.
func With(ctx context.Context, p *Piggyback) context.Context {
	return context.WithValue(ctx, piggybackKey{}, p)
}

type piggybackKey struct{}

// Sent reports whether p's statements were sent: whether a statement was
// sent under the context since p was attached.
func (p *Piggyback) Sent() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sent
}

// Err returns the first error of the round trip p travelled in: the
// statement's own, one of p's statements', or one returned by one of
// After's callbacks (which fails nothing in the database). It is nil until
// the round trip is over: for a query, until its rows are read or closed.
func (p *Piggyback) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// Take returns the piggyback of ctx if it has not travelled yet, and marks
// it taken; nil otherwise. The driver calls it for each statement it sends.
func Take(ctx context.Context) *Piggyback {
	p, _ := ctx.Value(piggybackKey{}).(*Piggyback)
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sent {
		return nil
	}
	p.sent = true
	return p
}

// Fail ends p's round trip with err (the first error wins); nothing when p
// or err is nil. A piggyback whose statement could not be sent (no
// connection) counts as sent: the caller learns it from Err.
func (p *Piggyback) Fail(err error) {
	if p == nil || err == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err == nil {
		p.err = err
	}
}

// Queued is a statement queued on a transaction by Tx.Queue.
type Queued struct{ Statement Statement }

// Tx is what the store does with a transaction of the pgx driver besides
// ent's statements.
type Tx interface {
	// Queue queues a statement that is sent ahead of the transaction's
	// next statement (or COMMIT), in the same round trip. Its result is
	// not delivered; if it fails, the statement it travels with does not
	// run and reports its error, and the transaction is aborted, as with
	// any failed statement. Queued statements are dropped by Rollback.
	//
	// A statement that decides whether the transaction may commit, such
	// as a completion UPDATE fenced by an attempt number, must fail by
	// itself (raise an error) when it finds nothing to do: queued with
	// COMMIT, it gets no chance to be looked at before COMMIT runs.
	Queue(query string, args ...any) *Queued
	// Unqueue removes q if it has not been sent yet, and reports whether
	// it had not: a SAVEPOINT still queued when the work it marks turns
	// out to need undoing is dropped rather than sent and rolled back to.
	Unqueue(q *Queued) bool
	// RollbackLater ends the transaction for its callers at once, and
	// rolls it back in the background: from its return on, Commit,
	// Rollback and every statement fail with sql.ErrTxDone, while ROLLBACK
	// (when the transaction reached the server) travels on its own and the
	// connection then goes back to the pool. For a transaction that wrote
	// nothing, whose caller need not wait a round trip for its end. It
	// returns sql.ErrTxDone when the transaction is over already, and
	// fails as a statement would while a query's rows are open.
	RollbackLater() error
	// Done reports whether the transaction is over: committed, rolled
	// back, or rolled back because its context ended. It does not wait
	// for a statement in flight.
	Done() bool
}

// CaptureTx returns a context under which the first transaction the driver
// begins is also stored in *dst. Code that begins its transactions through
// ent's generated client (client.Tx(ctx)), which hides the driver's
// transaction, reaches it this way:
//
//	var ptx pgxpipe.Tx
//	tx, err := client.Tx(pgxpipe.CaptureTx(ctx, &ptx))
func CaptureTx(ctx context.Context, dst *Tx) context.Context {
	return context.WithValue(ctx, captureKey{}, &capture{dst: dst})
}

type captureKey struct{}

type capture struct {
	once sync.Once
	dst  *Tx
}

// Began stores tx, a transaction the driver began under ctx, where
// CaptureTx asked for it (the first one only).
func Began(ctx context.Context, tx Tx) {
	if c, ok := ctx.Value(captureKey{}).(*capture); ok {
		c.once.Do(func() { *c.dst = tx })
	}
}
