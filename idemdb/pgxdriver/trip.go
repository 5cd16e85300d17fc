package pgxdriver

import (
	"context"
	"errors"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Statement is an SQL statement and its arguments.
type Statement struct {
	SQL  string
	Args []any
}

// Piggyback holds statements that travel in the round trip of the next
// statement a Driver sends under a context made by WithPiggyback, on the
// pool or in a transaction: Before are sent ahead of that statement, After
// behind it. It lets code that cannot send a statement itself, such as
// ent's generated code, carry someone else's statements: the claim's
// INSERT of a generated create, built by ent, can carry the lookup that
// reads the key's record when the key turns out to be taken.
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

// WithPiggyback returns a context under which the next statement the
// driver sends carries p's statements: the next Exec or Query (ent's
// statements) or ExecContext; QueryContext, which goes through
// database/sql, does not carry it.
func WithPiggyback(ctx context.Context, p *Piggyback) context.Context {
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

// takePiggyback returns the piggyback of ctx if it has not travelled yet,
// and marks it taken; nil otherwise.
func takePiggyback(ctx context.Context) *Piggyback {
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

// fail ends p's round trip with err. A piggyback whose statement could not
// be sent (no connection) counts as sent: the caller learns it from Err.
func (p *Piggyback) fail(err error) {
	if p == nil || err == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err == nil {
		p.err = err
	}
}

// trip is one statement and what travels with it: the statements a
// transaction queued (BEGIN first) and a piggyback.
type trip struct {
	before []Statement
	pb     *Piggyback
}

func (t trip) alone() bool { return len(t.before) == 0 && t.pb == nil }

// lead is a statement of the trip ahead of the query: fn, when not nil,
// reads its result (First's callbacks).
type lead struct {
	fn func(pgx.BatchResults) error
}

// batch queues every statement of the trip. The callbacks of After are
// wrapped: an error of a callback is the caller's, recorded in the
// piggyback, and must not stop pgx from reading the results that follow,
// where the database's own errors would otherwise go unseen.
func (t trip) batch(query string, args []any) (b *pgx.Batch, leads []lead) {
	b = &pgx.Batch{}
	queue := func(ss []Statement) {
		for _, s := range ss {
			b.Queue(s.SQL, s.Args...)
			leads = append(leads, lead{})
		}
	}
	if t.pb != nil && t.pb.First != nil {
		for _, qq := range t.pb.First.QueuedQueries {
			b.Queue(qq.SQL, qq.Arguments...)
			leads = append(leads, lead{fn: qq.Fn})
		}
	}
	queue(t.before)
	if t.pb != nil {
		queue(t.pb.Before)
	}
	b.Queue(query, args...)
	if t.pb != nil && t.pb.After != nil {
		for _, qq := range t.pb.After.QueuedQueries {
			q := b.Queue(qq.SQL, qq.Arguments...)
			if fn := qq.Fn; fn != nil {
				q.Fn = func(br pgx.BatchResults) error {
					t.pb.fail(fn(br))
					return nil
				}
			}
		}
	}
	return b, leads
}

// exec1 sends query, with what travels with it, and returns its command
// tag.
func exec1(ctx context.Context, conn *pgx.Conn, t trip, query string, args []any) (pgconn.CommandTag, error) {
	if t.alone() {
		return conn.Exec(ctx, query, args...)
	}
	b, leads := t.batch(query, args)
	br := conn.SendBatch(ctx, b)
	err := skip(br, leads)
	var tag pgconn.CommandTag
	if err == nil {
		tag, err = br.Exec()
	}
	return tag, t.end(br, err)
}

// query1 sends query, with what travels with it, and returns its rows and
// a func that ends the round trip once the rows are done with (and reports
// the error of what travelled behind the query, which is the query's too).
func query1(ctx context.Context, conn *pgx.Conn, t trip, query string, args []any) (pgx.Rows, func() error, error) {
	if t.alone() {
		rows, err := conn.Query(ctx, query, args...)
		if err != nil {
			return nil, nil, err
		}
		return rows, func() error { return nil }, nil
	}
	b, leads := t.batch(query, args)
	br := conn.SendBatch(ctx, b)
	if err := skip(br, leads); err != nil {
		return nil, nil, t.end(br, err)
	}
	rows, err := br.Query()
	if err != nil {
		return nil, nil, t.end(br, err)
	}
	return rows, func() error {
		rows.Close()
		return t.end(br, rows.Err())
	}, nil
}

// skip reads the results of the statements ahead of the query: First's
// go to their callbacks; nobody awaits the others'.
func skip(br pgx.BatchResults, leads []lead) error {
	for _, l := range leads {
		var err error
		if l.fn != nil {
			err = l.fn(br)
		} else {
			_, err = br.Exec()
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// end reads the rest of the round trip and returns the statement's error:
// its own, or that of a statement that travelled with it, since they
// succeed or fail together.
func (t trip) end(br pgx.BatchResults, err error) error {
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if !pgconn.SafeToRetry(err) { // else the caller tries again, or records it
		t.pb.fail(err)
	}
	return err
}

// errBusy is returned for a statement sent on a transaction whose previous
// query's rows are still open, as pgx does for a busy connection.
var errBusy = errors.New("pgxdriver: the transaction's connection is busy: close the rows of the previous query first")
