package pgxdriver

import (
	"database/sql"
	"database/sql/driver"
	"errors"

	entsql "entgo.io/ent/dialect/sql"
	"github.com/jackc/pgx/v5"
)

// rows gives pgx's rows the shape ent reads (entsql.ColumnScanner).
// Values are scanned by pgx, which fills sql.Scanner destinations (the
// sql.Null* types ent's generated code scans into, uuid.UUID, …) with the
// same values database/sql would; a destination that only database/sql
// knows how to fill (*any, *driver.Value, *entsql.UnknownType: values of
// columns ent does not know) gets database/sql's representation too.
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

var _ entsql.ColumnScanner = (*rows)(nil)

// newRows reads the first row of r, whose round trip finish ends and
// release then gives the connection back. If the statement failed, it
// ends the round trip, releases, and returns the error.
func newRows(r pgx.Rows, finish func() error, release func()) (*rows, error) {
	rs := &rows{Rows: r, finish: finish, release: release, preloaded: true}
	rs.more = r.Next()
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

// errNoColumnTypes: database/sql's *sql.ColumnType cannot be made outside
// database/sql. Only entsql.ScanTypeOf asks for them, and it falls back to
// scanning into *any, which Scan supports.
var errNoColumnTypes = errors.New("pgxdriver: column types are not available (database/sql's ColumnType cannot be made by another driver)")

// ColumnTypes returns an error: see errNoColumnTypes.
func (r *rows) ColumnTypes() ([]*sql.ColumnType, error) { return nil, errNoColumnTypes }

// NextResultSet reports false: a statement sent through the extended
// protocol has one result set.
func (r *rows) NextResultSet() bool { return false }

// Scan copies the current row's columns into dest.
func (r *rows) Scan(dest ...any) error {
	// dest is often the caller's own slice (Scan(values...)), which it reads
	// again afterwards: replace destinations in a copy.
	adapted := dest
	for i, d := range dest {
		var s valueScanner
		switch d := d.(type) {
		case *any:
			s.set = func(v driver.Value) { *d = v }
		case *driver.Value:
			s.set = func(v driver.Value) { *d = v }
		case *entsql.UnknownType:
			s.set = func(v driver.Value) { *d = v }
		default:
			continue
		}
		if &adapted[0] == &dest[0] {
			adapted = append([]any(nil), dest...)
		}
		adapted[i] = s
	}
	return r.Rows.Scan(adapted...)
}

// valueScanner receives a column's value as database/sql represents it
// (int64, float64, bool, []byte, string, time.Time or nil: pgx's
// DecodeDatabaseSQLValue, which pgx's database/sql driver uses too).
type valueScanner struct{ set func(driver.Value) }

func (s valueScanner) Scan(v any) error {
	if b, ok := v.([]byte); ok {
		v = append([]byte(nil), b...) // pgx may reuse its read buffer
	}
	s.set(v)
	return nil
}
