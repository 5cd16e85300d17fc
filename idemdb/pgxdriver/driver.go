package pgxdriver

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/goovo/idem/internal/pgxpipe"
)

// Driver is an ent driver (dialect.Driver) that runs ent's statements on a
// pgxpool.Pool through pgx itself, without database/sql. Its transactions
// (Tx) send BEGIN with their first statement, and the idempotency hook's
// store adds its statements to ent's round trips (internal/pgxpipe).
//
// A Driver is safe for concurrent use. Close it when done.
type Driver struct {
	pool    *pgxpool.Pool
	db      *sql.DB
	rows    *sql.DB // makes ent's *sql.Rows of pgx's rows (asSQL)
	ownPool bool
}

var (
	_ dialect.Driver = (*Driver)(nil)
	_ dialect.Tx     = (*Tx)(nil)
)

// Open connects to the PostgreSQL URL (or keyword/value string) dsn with
// pgxpool's settings, read from dsn as pgxpool.ParseConfig does
// (pool_max_conns, default_query_exec_mode, …). The pool connects lazily:
// an unreachable database is reported by the first statement.
func Open(dsn string) (*Driver, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("pgxdriver: %w", err)
	}
	return OpenConfig(cfg)
}

// OpenConfig opens a pool with cfg and returns a driver that owns it:
// Close closes the pool. Its connections encode github.com/google/uuid
// values in binary (RegisterUUID), after cfg.AfterConnect, if any.
func OpenConfig(cfg *pgxpool.Config) (*Driver, error) {
	cfg = cfg.Copy()
	after := cfg.AfterConnect
	cfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		RegisterUUID(conn)
		if after != nil {
			return after(ctx, conn)
		}
		return nil
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return nil, fmt.Errorf("pgxdriver: %w", err)
	}
	d := New(pool)
	d.ownPool = true
	return d, nil
}

// New returns a driver over pool, which the caller keeps: Close leaves it
// open. Register RegisterUUID in the pool's AfterConnect, as OpenConfig
// does.
func New(pool *pgxpool.Pool) *Driver {
	rows := sql.OpenDB(launderer{})
	rows.SetMaxIdleConns(int(pool.Config().MaxConns) + 1)
	return &Driver{pool: pool, db: stdlib.OpenDBFromPool(pool), rows: rows}
}

// Pool returns the driver's pool.
func (d *Driver) Pool() *pgxpool.Pool { return d.pool }

// DB returns a database/sql view of the same pool (stdlib.OpenDBFromPool):
// its connections count against the pool's bound. Code that needs a
// *sql.DB uses it.
func (d *Driver) DB() *sql.DB { return d.db }

// Dialect implements dialect.Driver: "postgres".
func (d *Driver) Dialect() string { return dialect.Postgres }

// Close closes the database/sql view and, if the driver opened it, the
// pool (which waits for the connections in use to be released).
func (d *Driver) Close() error {
	err := errors.Join(d.db.Close(), d.rows.Close())
	if d.ownPool {
		d.pool.Close()
	}
	return err
}

// Exec implements dialect.ExecQuerier: it runs query on a pooled
// connection; v is nil or an *entsql.Result.
func (d *Driver) Exec(ctx context.Context, query string, args, v any) error {
	argv, err := argsOf(args)
	if err != nil {
		return err
	}
	tag, err := d.exec(ctx, query, argv)
	if err != nil {
		return err
	}
	return setResult(v, tag)
}

// Query implements dialect.ExecQuerier: it runs query on a pooled
// connection, which goes back to the pool when the rows are closed; v is
// an *entsql.Rows.
func (d *Driver) Query(ctx context.Context, query string, args, v any) error {
	vr, ok := v.(*entsql.Rows)
	if !ok {
		return fmt.Errorf("pgxdriver: invalid type %T, expect *sql.Rows", v)
	}
	argv, err := argsOf(args)
	if err != nil {
		return err
	}
	sr, err := d.query(ctx, pgxpipe.Take(ctx), query, argv)
	if err != nil {
		return err
	}
	*vr = entsql.Rows{ColumnScanner: sr}
	return nil
}

// query runs query on a pooled connection, with pb's statements (nil:
// none), and hands its rows out as *sql.Rows (asSQL).
func (d *Driver) query(ctx context.Context, pb *pgxpipe.Piggyback, query string, argv []any) (*sql.Rows, error) {
	for try := 0; ; try++ {
		conn, err := d.pool.Acquire(ctx)
		if err != nil {
			pb.Fail(err)
			return nil, err
		}
		r, finish, err := query1(ctx, conn.Conn(), trip{pb: pb}, query, argv)
		if err != nil {
			conn.Release()
			if retry(err, try) {
				continue
			}
			pb.Fail(err)
			return nil, err
		}
		rs, err := newRows(r, finish, conn.Release)
		if err != nil {
			pb.Fail(err)
			return nil, err
		}
		return asSQL(ctx, d.rows, rs)
	}
}

// ExecContext runs query on a pooled connection, as database/sql's
// DB.ExecContext does: ent's generated client calls it (the sql/execquery
// feature).
func (d *Driver) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	tag, err := d.exec(ctx, query, args)
	if err != nil {
		return nil, err
	}
	return result(tag), nil
}

// QueryContext runs query on a pooled connection, as database/sql's
// DB.QueryContext does: ent's generated client calls it (the sql/execquery
// feature), and so does the idempotency hook's lookup. Its rows are pgx's,
// handed out as *sql.Rows as Query's are: through the database/sql view of
// the pool (DB), every query would open a database/sql connection of its
// own (acquire, wrap, close and release a pooled connection). Nothing the
// hook's store attaches to the context travels with it (internal/pgxpipe).
func (d *Driver) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return d.query(ctx, nil, query, args)
}

// SendBatch sends b on a pooled connection in one round trip and reads
// every result, calling b's callbacks (pgx.QueuedQuery.Exec, QueryRow,
// Query); it returns the first error, a statement's or a callback's. The
// statements run in one implicit transaction: they commit together when
// the last one succeeds, and none does if one fails.
func (d *Driver) SendBatch(ctx context.Context, b *pgx.Batch) error {
	return d.pool.AcquireFunc(ctx, func(c *pgxpool.Conn) error {
		return c.SendBatch(ctx, b).Close()
	})
}

// Tx implements dialect.Driver: BeginTx with the default options.
func (d *Driver) Tx(ctx context.Context) (dialect.Tx, error) {
	return d.BeginTx(ctx, nil)
}

// BeginTx starts a transaction (ent's generated Client.BeginTx calls it).
// Nothing is sent yet, and no connection is taken from the pool: the
// transaction's first statement takes one and carries BEGIN with it. As
// with database/sql, the transaction is rolled back when ctx ends before
// it is committed.
func (d *Driver) BeginTx(ctx context.Context, opts *sql.TxOptions) (dialect.Tx, error) {
	begin, err := beginSQL(opts)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err // as database/sql: no transaction under an ended context
	}
	tx := &Tx{d: d, ctx: ctx, begin: begin}
	// Under tx.mu: if ctx ends right now, cancelled runs at once, in its
	// own goroutine, and must find stop set (it calls it, through finish).
	tx.mu.Lock()
	tx.stop = context.AfterFunc(ctx, tx.cancelled)
	tx.mu.Unlock()
	pgxpipe.Began(ctx, (*pipeTx)(tx))
	return tx, nil
}

// beginSQL maps database/sql's options onto PostgreSQL's BEGIN, as pgx's
// database/sql driver does.
func beginSQL(opts *sql.TxOptions) (string, error) {
	if opts == nil {
		return "begin", nil
	}
	s := "begin"
	switch opts.Isolation {
	case sql.LevelDefault:
	case sql.LevelReadUncommitted:
		s += " isolation level read uncommitted"
	case sql.LevelReadCommitted:
		s += " isolation level read committed"
	case sql.LevelRepeatableRead, sql.LevelSnapshot:
		s += " isolation level repeatable read"
	case sql.LevelSerializable:
		s += " isolation level serializable"
	default:
		return "", fmt.Errorf("pgxdriver: unsupported isolation level %v", opts.Isolation)
	}
	if opts.ReadOnly {
		s += " read only"
	}
	return s, nil
}

// exec runs one statement outside a transaction, trying again on another
// connection when the first could not send it (a connection that died
// while it sat in the pool), as database/sql does.
func (d *Driver) exec(ctx context.Context, query string, args []any) (pgconn.CommandTag, error) {
	pb := pgxpipe.Take(ctx)
	for try := 0; ; try++ {
		conn, err := d.pool.Acquire(ctx)
		if err != nil {
			pb.Fail(err)
			return pgconn.CommandTag{}, err
		}
		tag, err := exec1(ctx, conn.Conn(), trip{pb: pb}, query, args)
		conn.Release()
		if err != nil && retry(err, try) {
			continue
		}
		pb.Fail(err)
		return tag, err
	}
}

// maxTries bounds the tries of a statement that could not be sent.
const maxTries = 3

// retry reports whether a statement that failed with err on its try-th
// try may be sent again: only if nothing of it reached the server.
func retry(err error, try int) bool {
	return try+1 < maxTries && pgconn.SafeToRetry(err)
}

func argsOf(args any) ([]any, error) {
	switch a := args.(type) {
	case []any:
		return a, nil
	case nil:
		return nil, nil
	}
	return nil, fmt.Errorf("pgxdriver: invalid type %T, expect []any for args", args)
}

func setResult(v any, tag pgconn.CommandTag) error {
	switch v := v.(type) {
	case nil:
		return nil
	case *sql.Result:
		*v = result(tag)
		return nil
	}
	return fmt.Errorf("pgxdriver: invalid type %T, expect *sql.Result", v)
}

// result is the sql.Result of a statement: PostgreSQL reports rows
// affected, and ent reads ids with RETURNING, never LastInsertId.
type result pgconn.CommandTag

func (r result) RowsAffected() (int64, error) { return pgconn.CommandTag(r).RowsAffected(), nil }

func (r result) LastInsertId() (int64, error) {
	return 0, errors.New("pgxdriver: LastInsertId is not supported by PostgreSQL; use RETURNING")
}
