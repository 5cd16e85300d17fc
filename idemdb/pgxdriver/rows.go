package pgxdriver

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"

	"github.com/jackc/pgx/v5"
)

// rows are the rows of one query and the end of its round trip; ent reads
// them through database/sql (asSQL).
type rows struct {
	pgx.Rows
	finish  func() error // ends the round trip
	release func()       // then gives the connection (or the transaction) back
	err     error        // of the round trip, once finished
	ended   bool
	// The first row is read before the rows are handed out, as pgx's
	// database/sql driver does, so that a statement that fails (a unique
	// violation of an INSERT … RETURNING) fails the query itself, not its
	// first Next: ent reads the columns before it looks at Err.
	preloaded, more bool
	columns         []string
}

// newRows reads the first row of r, whose round trip finish ends and
// release then gives the connection back. If the statement failed, it
// ends the round trip, releases, and returns the error.
func newRows(r pgx.Rows, finish func() error, release func()) (*rows, error) {
	rs := &rows{Rows: r, finish: finish, release: release, preloaded: true}
	rs.more = r.Next()
	// The column names, before the rows end: pgx forgets them once the
	// rows are closed (an INSERT … RETURNING that inserted nothing).
	_, _ = rs.Columns()
	if !rs.more {
		rs.end()
		if rs.err != nil {
			return nil, rs.err
		}
	}
	return rs, nil
}

// Next advances to the next row. After the last one it ends the round
// trip, so that Err reports the statements that travelled behind the
// query.
func (r *rows) Next() bool {
	if r.preloaded {
		r.preloaded = false
		return r.more
	}
	if r.ended {
		return false
	}
	if r.Rows.Next() {
		return true
	}
	r.end()
	return false
}

// Err returns the error of the query, or of its round trip.
func (r *rows) Err() error {
	if r.err != nil {
		return r.err
	}
	return r.Rows.Err()
}

// Close ends the round trip and gives the connection back.
func (r *rows) Close() error {
	r.end()
	return r.err
}

// end ends the round trip and gives the connection back, after the last
// row or at Close, as database/sql does.
func (r *rows) end() {
	if r.ended {
		return
	}
	r.ended = true
	r.Rows.Close()
	r.err = r.Rows.Err()
	if err := r.finish(); r.err == nil {
		r.err = err
	}
	r.release()
}

// Columns returns the names of the result's columns.
func (r *rows) Columns() ([]string, error) {
	if r.columns == nil {
		fds := r.FieldDescriptions()
		r.columns = make([]string, len(fds))
		for i, fd := range fds {
			r.columns[i] = fd.Name
		}
	}
	return r.columns, nil
}

// asSQL hands rs to ent as *sql.Rows, which only database/sql can make:
// through db (the driver's launderer), whose connections serve the rows
// that the context carries, already read from PostgreSQL. ent's
// migrations (Atlas) insist on *sql.Rows; everything else reads them as
// it reads database/sql's rows on pgx's own database/sql driver, with the
// same values.
func asSQL(ctx context.Context, db *sql.DB, rs *rows) (*sql.Rows, error) {
	sr, err := db.QueryContext(context.WithValue(ctx, launderKey{}, rs), "")
	if err != nil {
		rs.Close()
		return nil, err
	}
	return sr, nil
}

type launderKey struct{}

// launderer is a database/sql driver whose connections only hand out the
// rows their query's context carries.
type launderer struct{}

func (launderer) Connect(context.Context) (driver.Conn, error) { return launderConn{}, nil }
func (launderer) Driver() driver.Driver                        { return launderer{} }
func (launderer) Open(string) (driver.Conn, error)             { return launderConn{}, nil }

type launderConn struct{}

var (
	_ driver.QueryerContext    = launderConn{}
	_ driver.NamedValueChecker = launderConn{}
)

var errLaunderOnly = errors.New("pgxdriver: internal: the rows connection only hands out rows")

func (launderConn) Prepare(string) (driver.Stmt, error)      { return nil, errLaunderOnly }
func (launderConn) Close() error                             { return nil }
func (launderConn) Begin() (driver.Tx, error)                { return nil, errLaunderOnly }
func (launderConn) CheckNamedValue(*driver.NamedValue) error { return nil }

func (launderConn) QueryContext(ctx context.Context, _ string, _ []driver.NamedValue) (driver.Rows, error) {
	rs, ok := ctx.Value(launderKey{}).(*rows)
	if !ok {
		return nil, errLaunderOnly
	}
	return launderedRows{rs}, nil
}

// launderedRows are pgx's rows as a database/sql driver's, with the values
// pgx's database/sql driver gives.
type launderedRows struct{ rs *rows }

func (r launderedRows) Columns() []string {
	c, _ := r.rs.Columns()
	return c
}

func (r launderedRows) Close() error { return r.rs.Close() }

func (r launderedRows) Next(dest []driver.Value) error {
	if !r.rs.Next() {
		if err := r.rs.Err(); err != nil {
			return err
		}
		return io.EOF
	}
	return decodeRow(r.rs.Rows, dest)
}
