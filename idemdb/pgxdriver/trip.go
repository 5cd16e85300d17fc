package pgxdriver

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/goovo/idem/internal/pgxpipe"
)

// trip is one statement and what travels with it: the statements a
// transaction queued (BEGIN first) and a piggyback.
type trip struct {
	before []pgxpipe.Statement
	pb     *pgxpipe.Piggyback
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
	queue := func(ss []pgxpipe.Statement) {
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
					t.pb.Fail(fn(br))
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
		t.pb.Fail(err)
	}
	return err
}

// errBusy is returned for a statement sent on a transaction whose previous
// query's rows are still open, as pgx does for a busy connection.
var errBusy = errors.New("pgxdriver: the transaction's connection is busy: close the rows of the previous query first")
