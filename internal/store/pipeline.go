package store

import (
	"context"
	"database/sql"
	"errors"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/goovo/idem/idembackend"
	"github.com/goovo/idem/internal/pgxpipe"
	"github.com/goovo/idem/internal/record"
)

// pipelined is PostgreSQL's driver. Over database/sql (an ent client on
// idemdb.OpenSQL) it is the standard one (sqlDriver), one statement per
// round trip. Over pgx (an ent client on a pgxdriver.Driver, which
// idemdb.Open returns for PostgreSQL) it folds the protocol's statements
// into the round trips that must happen anyway:
//
//   - a claim sends, in one round trip, the lookup of the key, BEGIN and
//     the insert; when the key is taken, the insert writes nothing and the
//     lookup has read the holder: a retry of a finished key is answered
//     after that round trip and writes nothing (in a transaction, the
//     ROLLBACK follows, off the request's path);
//   - SAVEPOINT travels with the resolver's first statement;
//   - the completion's fenced UPDATE travels with COMMIT, and fails when it
//     updates nothing, which stops the COMMIT (the only statement that
//     fails on purpose, and only for an attempt that lost its claim: pgx
//     forgets the prepared statements of a round trip that failed).
//
// Processes on either path may share a database: the unique index is the
// arbiter of a key.
type pipelined struct {
	*sqlDriver

	mu  sync.Mutex
	txs map[idembackend.Tx]*pipeTx // the transactions begun on pgx, until completed
}

// pipeTx is a transaction of the protocol on pgx.
type pipeTx struct {
	tx        pgxpipe.Tx
	savepoint *pgxpipe.Queued // the SAVEPOINT, while it may still be queued
}

// divisionByZero is the SQLSTATE of the failure stmtCompleteOrFail raises
// on purpose.
const divisionByZero = "22012"

func newPipelined(d *sqlDriver) *pipelined {
	return &pipelined{sqlDriver: d, txs: map[idembackend.Tx]*pipeTx{}}
}

// Begin begins a transaction; on pgx nothing is sent until its first
// statement, which carries BEGIN.
func (d *pipelined) Begin(ctx context.Context) (context.Context, idembackend.Tx, error) {
	var ptx pgxpipe.Tx
	txCtx, tx, err := d.conn.BeginTx(pgxpipe.CaptureTx(ctx, &ptx))
	if err != nil {
		return ctx, nil, d.err("begin", err)
	}
	if ptx != nil {
		d.mu.Lock()
		for t, p := range d.txs { // those the protocol rolled back itself
			if p.tx.Done() {
				delete(d.txs, t)
			}
		}
		d.txs[tx] = &pipeTx{tx: ptx}
		d.mu.Unlock()
	}
	return txCtx, tx, nil
}

// pipe returns the pgx transaction of tx, nil for one of database/sql;
// with forget, it stops tracking it.
func (d *pipelined) pipe(tx idembackend.Tx, forget bool) *pipeTx {
	if tx == nil {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	p := d.txs[tx]
	if forget {
		delete(d.txs, tx)
	}
	return p
}

// Claim claims with the lookup ahead of the insert (see pipelined). Over
// database/sql, where nothing travels with the insert, it is the standard
// claim.
func (d *pipelined) Claim(ctx context.Context, c Claim) (Claimed, error) {
	var (
		holder  *record.Record
		reading Reading
		looked  bool
	)
	first := &pgx.Batch{}
	first.Queue(d.stmts(c.Ref.Table, "")[stmtLookup], c.Ref.Tenant, c.Ref.Key).QueryRow(func(row pgx.Row) (err error) {
		holder, reading, err = d.scanLookupPgx(row)
		looked = err == nil
		return err
	})
	pb := &pgxpipe.Piggyback{First: first}
	won, err := c.Insert(pgxpipe.With(ctx, pb), c.Tx)
	switch {
	case !pb.Sent():
		return d.inserted(ctx, c, won, err)
	case won && err == nil:
		return Claimed{Won: true}, nil
	}
	p := d.pipe(c.Tx, true)
	if err == nil && looked && holder != nil {
		// The key was taken before the claim: the lookup read its holder,
		// and the insert wrote nothing. Nor did the transaction, so the
		// replay need not wait for its ROLLBACK: it answers after this
		// one round trip while the ROLLBACK ends the transaction and
		// gives the connection back (a request that needs one meanwhile
		// waits for it, as for any busy connection). The transaction is
		// over for its callers at once, as after any lost claim.
		switch {
		case p != nil:
			_ = p.tx.RollbackLater()
		case c.Tx != nil:
			_ = c.Tx.Rollback()
		}
		return Claimed{Holder: holder, Reading: reading}, nil
	}
	// Failed, or taken by a claim that committed after the lookup (the
	// insert waited for it): the standard way on, which looks again.
	return d.inserted(ctx, c, won, err)
}

// Savepoint queues SAVEPOINT on pgx: it travels with the resolver's first
// statement, or is dropped if nothing follows it.
func (d *pipelined) Savepoint(ctx context.Context, tx idembackend.Tx) error {
	p := d.pipe(tx, false)
	if p == nil {
		return d.sqlDriver.Savepoint(ctx, tx)
	}
	p.savepoint = p.tx.Queue(d.sql[stmtSavepoint])
	return nil
}

// Complete sends the fenced UPDATE with COMMIT on pgx, in one round trip
// (with DiscardWrites, ROLLBACK TO SAVEPOINT ahead of them, unless the
// SAVEPOINT was never sent; without, a SAVEPOINT still queued is dropped).
func (d *pipelined) Complete(ctx context.Context, tx idembackend.Tx, c Completion) (bool, error) {
	p := d.pipe(tx, true)
	if p == nil {
		return d.sqlDriver.Complete(ctx, tx, c)
	}
	switch {
	case c.DiscardWrites && (p.savepoint == nil || !p.tx.Unqueue(p.savepoint)):
		p.tx.Queue(d.sql[stmtRollbackToSavepoint])
	case !c.DiscardWrites && p.savepoint != nil:
		// Nothing will roll back to a SAVEPOINT still queued (the resolver
		// wrote nothing, as when the claim's row is the entity): sent, it
		// would only open a subtransaction for the completion's UPDATE.
		p.tx.Unqueue(p.savepoint)
	}
	p.tx.Queue(d.stmts(c.Ref.Table, "")[stmtCompleteOrFail],
		c.Ref.Tenant, c.Ref.Key, c.Status, c.Response, c.At.UTC(), c.Attempt, expiry(c))
	err := tx.Commit()
	var pg *pgconn.PgError
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &pg) && pg.Code == divisionByZero:
		return false, nil // fenced out: rolled back
	}
	_ = tx.Rollback() // if the commit left it open
	return false, d.err("complete", err)
}

// scanLookupPgx is scanLookup on pgx, into pgx's own types: the
// database/sql types of scanLookup take a detour through driver.Value on
// pgx, a conversion and an allocation for each column, on every claim.
func (d *pipelined) scanLookupPgx(row pgx.Row) (*record.Record, Reading, error) {
	var (
		v struct {
			dbNow, lease, claimed, completed, archived pgtype.Timestamptz
			status, fingerprint                        pgtype.Text
			attempt                                    pgtype.Int8
		}
		response []byte
	)
	if err := row.Scan(&v.dbNow, &v.status, &v.fingerprint, &response, &v.attempt, &v.lease, &v.claimed, &v.completed, &v.archived); err != nil {
		return nil, Reading{}, err
	}
	for _, ts := range []*pgtype.Timestamptz{&v.dbNow, &v.lease, &v.claimed, &v.completed, &v.archived} {
		if ts.Valid && ts.InfinityModifier != pgtype.Finite {
			return nil, Reading{}, errors.New("lookup read an infinite timestamp")
		}
	}
	t := func(ts pgtype.Timestamptz) sql.NullTime { return sql.NullTime{Time: ts.Time, Valid: ts.Valid} }
	return d.lookedUp(&lookupRow{
		dbNow:       t(v.dbNow),
		status:      sql.NullString{String: v.status.String, Valid: v.status.Valid},
		fingerprint: sql.NullString{String: v.fingerprint.String, Valid: v.fingerprint.Valid},
		response:    response,
		attempt:     sql.NullInt64{Int64: v.attempt.Int64, Valid: v.attempt.Valid},
		lease:       t(v.lease), claimed: t(v.claimed), completed: t(v.completed), archived: t(v.archived),
	})
}
