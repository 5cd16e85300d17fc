package pgxdriver

import (
	"context"
	"database/sql/driver"
	"errors"
	"io"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// A database/sql driver over the connection of one Tx, for Tx.QueryContext:
// *sql.Rows can only be made by database/sql, from a driver. It runs
// queries only (ExecContext runs natively), on a connection that the
// transaction owns and has flushed, and decodes values as pgx's own
// database/sql driver (stdlib) does: binary results for the types Go's
// database/sql knows, text for the rest, and pgtype's
// DecodeDatabaseSQLValue for each.

type sqlConnector struct{ tx *Tx }

func (c sqlConnector) Connect(context.Context) (driver.Conn, error) { return sqlConn(c), nil }
func (sqlConnector) Driver() driver.Driver                          { return sqlDriver{} }

type sqlDriver struct{}

func (sqlDriver) Open(string) (driver.Conn, error) {
	return nil, errors.New("pgxdriver: the transaction driver cannot be opened by name")
}

type sqlConn struct{ tx *Tx }

var (
	_ driver.QueryerContext    = sqlConn{}
	_ driver.NamedValueChecker = sqlConn{}
)

var errQueryOnly = errors.New("pgxdriver: only QueryContext goes through database/sql in a transaction")

func (sqlConn) Prepare(string) (driver.Stmt, error) { return nil, errQueryOnly }
func (sqlConn) Close() error                        { return nil } // the transaction owns the connection
func (sqlConn) Begin() (driver.Tx, error)           { return nil, errQueryOnly }

// CheckNamedValue passes every argument to pgx as it is, as stdlib does:
// pgx encodes driver.Valuer and its own types itself.
func (sqlConn) CheckNamedValue(*driver.NamedValue) error { return nil }

// resultFormats asks for binary results of the types database/sql knows,
// and text for the rest, as stdlib does.
var resultFormats = pgx.QueryResultFormatsByOID{
	pgtype.BoolOID:        pgx.BinaryFormatCode,
	pgtype.ByteaOID:       pgx.BinaryFormatCode,
	pgtype.CIDOID:         pgx.BinaryFormatCode,
	pgtype.DateOID:        pgx.BinaryFormatCode,
	pgtype.Float4OID:      pgx.BinaryFormatCode,
	pgtype.Float8OID:      pgx.BinaryFormatCode,
	pgtype.Int2OID:        pgx.BinaryFormatCode,
	pgtype.Int4OID:        pgx.BinaryFormatCode,
	pgtype.Int8OID:        pgx.BinaryFormatCode,
	pgtype.OIDOID:         pgx.BinaryFormatCode,
	pgtype.TimestampOID:   pgx.BinaryFormatCode,
	pgtype.TimestamptzOID: pgx.BinaryFormatCode,
	pgtype.XIDOID:         pgx.BinaryFormatCode,
}

func (c sqlConn) QueryContext(ctx context.Context, query string, named []driver.NamedValue) (driver.Rows, error) {
	args := make([]any, 1+len(named))
	args[0] = resultFormats
	for i, nv := range named {
		args[1+i] = nv.Value
	}
	conn := c.tx.conn.Conn()
	rows, err := conn.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return &sqlRows{rows: rows, tx: c.tx}, nil
}

type sqlRows struct {
	rows   pgx.Rows
	tx     *Tx
	closed bool
}

func (r *sqlRows) Columns() []string {
	fds := r.rows.FieldDescriptions()
	names := make([]string, len(fds))
	for i, fd := range fds {
		names[i] = fd.Name
	}
	return names
}

func (r *sqlRows) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	r.rows.Close()
	r.tx.rowsClosed()
	return r.rows.Err()
}

func (r *sqlRows) Next(dest []driver.Value) error {
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return io.EOF
	}
	return decodeRow(r.rows, dest)
}

// decodeRow decodes the current row of rows as pgx's database/sql driver
// does: pgtype's DecodeDatabaseSQLValue for the types pgx knows.
func decodeRow(rows pgx.Rows, dest []driver.Value) error {
	m := rows.Conn().TypeMap()
	fds := rows.FieldDescriptions()
	for i, raw := range rows.RawValues() {
		fd := fds[i]
		switch t, ok := m.TypeForOID(fd.DataTypeOID); {
		case raw == nil:
			dest[i] = nil
		case ok:
			v, err := t.Codec.DecodeDatabaseSQLValue(m, fd.DataTypeOID, fd.Format, raw)
			if err != nil {
				return err
			}
			dest[i] = v
		case fd.Format == pgx.TextFormatCode:
			dest[i] = string(raw)
		default:
			dest[i] = append([]byte(nil), raw...)
		}
	}
	return nil
}
