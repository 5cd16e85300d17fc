package idembackend

// A claim born completed: the row of a create whose answer is known before
// it is written is inserted with its key, fingerprint, status succeeded and
// the rendered answer in one autocommitted statement (docs/protocol.md, "A
// claim born completed"). The row is first built as Insert would build it
// (ent's defaults, hooks and validators), without a statement: its client
// refuses every statement, so that a resolver or an edge that needs the
// database is seen and the hook goes back to the transaction it would have
// used anyway, with nothing written.

import (
	"context"
	"crypto/rand"
	stdsql "database/sql"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"entgo.io/ent/dialect"
	"entgo.io/ent/dialect/sql"
	"entgo.io/ent/dialect/sql/sqlgraph"
	"entgo.io/ent/schema/field"
)

// ErrNeedsStatement is what the client of a Prepared row answers to any
// statement: the request needs the database to be answered, so its claim
// cannot be born completed.
var ErrNeedsStatement = errors.New("idembackend: the answer needs a statement; the claim is not born completed")

// Prepared is a claim's row built in memory, not inserted: the generated
// Prepare of a record table returns it. Bind gives a context whose client
// refuses statements; the resolver runs on it, and Insert writes the row
// born completed.
type Prepared struct {
	withClient func(context.Context) context.Context
	tripped    atomic.Bool
	sentinel   int64
	insert     func(ctx context.Context, d Done) (id string, err error)
}

// Done is what a row born completed stores besides its business fields.
type Done struct {
	// Response is the stored answer; any occurrence of the Prepared row's
	// Sentinel in it is the id the database assigns.
	Response []byte
	// At is the claim's and the completion's time; Expires the record's
	// promised expiry.
	At, Expires time.Time
}

// NewPrepared starts a Prepared row; withClient returns a context carrying
// the generated package's refusing client (ent.NewContext). The row's id,
// which the database assigns, is a random negative number until Insert:
// Sentinel.
func NewPrepared(withClient func(context.Context) context.Context) *Prepared {
	var b [8]byte
	_, _ = rand.Read(b[:])
	// Negative, 18 digits or more: no real id, and never guessed.
	s := -int64(binary.LittleEndian.Uint64(b[:])>>4) - 1e17
	return &Prepared{sentinel: s, withClient: withClient}
}

type preparedKey struct{}

// Bind returns ctx carrying the refusing client (ent.FromContext), whose
// statements trip p: the context the row is built on, and the resolver's.
func (p *Prepared) Bind(ctx context.Context) context.Context {
	return context.WithValue(p.withClient(ctx), preparedKey{}, p)
}

// Sentinel is the id the in-memory row carries until Insert.
func (p *Prepared) Sentinel() int64 { return p.sentinel }

// SentinelText is Sentinel in decimal, as an integer id is rendered.
func (p *Prepared) SentinelText() string { return strconv.FormatInt(p.sentinel, 10) }

// Tripped reports whether anything asked the refusing client for a
// statement.
func (p *Prepared) Tripped() bool { return p.tripped.Load() }

// SetInsert sets the statement of the row (generated code).
func (p *Prepared) SetInsert(f func(ctx context.Context, d Done) (string, error)) { p.insert = f }

// Insert writes the row born completed in one autocommitted statement. id
// is the id the database assigned, in decimal, to put in place of
// SentinelText in the answer; "" when the row's id was known before (an
// ent default), and the answer holds it already. It returns sql.ErrNoRows
// (database/sql's) when the key is taken.
func (p *Prepared) Insert(ctx context.Context, d Done) (id string, err error) {
	if p.insert == nil {
		return "", errors.New("idembackend: Prepared has no statement")
	}
	return p.insert(ctx, d)
}

// Refusing wraps drv: every statement, and every transaction, of a context
// carrying a Prepared row is refused with ErrNeedsStatement and trips the
// row. The generated backend builds one client over it, once.
func Refusing(drv dialect.Driver) dialect.Driver { return refusing{drv} }

type refusing struct{ dialect.Driver }

func (r refusing) refuse(ctx context.Context) error {
	if p, ok := ctx.Value(preparedKey{}).(*Prepared); ok {
		p.tripped.Store(true)
	}
	return ErrNeedsStatement
}

func (r refusing) Exec(ctx context.Context, _ string, _, _ any) error  { return r.refuse(ctx) }
func (r refusing) Query(ctx context.Context, _ string, _, _ any) error { return r.refuse(ctx) }
func (r refusing) Tx(ctx context.Context) (dialect.Tx, error)          { return nil, r.refuse(ctx) }
func (r refusing) Close() error                                        { return nil }

// Completable reports whether a row of spec can be born completed on
// dialect d: its id known (an ent default) or assigned by the database
// from an integer sequence (read in the statement), its edges foreign keys
// of the row, and the dialect PostgreSQL or SQLite.
func Completable(d string, spec *sqlgraph.CreateSpec) bool {
	return (d == dialect.Postgres || d == dialect.SQLite) && rowOnly(spec) && (spec.ID.Value != nil || spec.ID.Type.Numeric())
}

// The idempotency columns the completed statement sets (the mixin's).
const (
	colStatus    = "idempotency_status"
	colResponse  = "idempotency_response"
	colLease     = "idempotency_lease_expires_at"
	colClaimed   = "idempotency_claimed_at"
	colCompleted = "idempotency_completed_at"
	colOperation = "idempotency_operation"
)

// CreateCompleted inserts the row of spec born completed, in one
// statement:
//
//	WITH n AS (next id) INSERT INTO t (id, …, idempotency_response)
//	VALUES (n.id, …, the response with Sentinel replaced by n.id)
//	ON CONFLICT (scope, idempotency_key) DO NOTHING RETURNING id
//
// so that the stored answer holds the id the row got, as the completion of
// a claim inserted first stores it (with an id known before, an ent
// default, there is no WITH and no RETURNING: the rows the statement
// affected say whether it won). It returns sql.ErrNoRows when the key
// is taken. The status is succeeded, the lease is the expiry (as a
// completion leaves it), no operation is kept. The statement's text is
// built once per dialect and set of columns, as Create's is; each call
// binds its values only.
func (ci *ClaimInsert) CreateCompleted(ctx context.Context, drv dialect.Driver, spec *sqlgraph.CreateSpec, sentinel string, d Done) (string, error) {
	dl := drv.Dialect()
	stmt, err := kept(&ci.completed, dl, spec, func(dl string, spec *sqlgraph.CreateSpec) (*claimStatement, error) {
		w := completedWriter{dl: dl, text: true}
		if err := w.write(spec, ci.Conflict, sentinel, d); err != nil {
			return nil, err
		}
		return &claimStatement{dialect: dl, table: spec.Table, idColumn: spec.ID.Column, columns: columnsOf(spec), query: w.query}, nil
	})
	if err != nil {
		return "", err
	}
	w := completedWriter{dl: dl, args: make([]any, 0, len(spec.Fields)+len(spec.Edges)+4)}
	if err := w.write(spec, ci.Conflict, sentinel, d); err != nil {
		return "", err
	}
	if spec.ID.Value != nil {
		// The id was known: a row inserted is the claim won. Without rows
		// to read, the statement is an Exec (on pgx, no rows to hand out
		// through database/sql).
		var res stdsql.Result
		if err := drv.Exec(ctx, stmt.query, w.args, &res); err != nil {
			return "", err
		}
		switch n, err := res.RowsAffected(); {
		case err != nil:
			return "", err
		case n == 0:
			return "", stdsql.ErrNoRows
		}
		return "", nil
	}
	rows := &sql.Rows{}
	if err := drv.Query(ctx, stmt.query, w.args, rows); err != nil {
		return "", err
	}
	defer rows.Close()
	id, err := sql.ScanInt64(rows)
	if err != nil {
		return "", err
	}
	return strconv.FormatInt(id, 10), nil
}

// completedWriter walks the statement of CreateCompleted: with the row's
// id when it is known, else with the next value of the table's sequence
// (WITH n), written into the response too. It always collects the
// arguments, in the order of their placeholders; with text, it writes the
// statement's text too (query), which depends on the dialect and the
// columns only (claimStatement.matches), and is kept.
type completedWriter struct {
	dl         string
	text       bool
	args       []any
	cols, vals []string
	query      string
}

// ph adds v to the arguments and returns its placeholder ("" without text).
func (w *completedWriter) ph(v any) string {
	w.args = append(w.args, v)
	switch {
	case !w.text:
		return ""
	case w.dl == dialect.Postgres:
		return "$" + strconv.Itoa(len(w.args))
	}
	return "?"
}

// add adds a column and the SQL of its value to the text.
func (w *completedWriter) add(col, val string) {
	if w.text {
		w.cols, w.vals = append(w.cols, quote(col)), append(w.vals, val)
	}
}

func (w *completedWriter) write(spec *sqlgraph.CreateSpec, conflict []string, sentinel string, d Done) error {
	table, id := quote(spec.Table), quote(spec.ID.Column)
	// The next id first: its placeholders come first in the text.
	with, idValue := "", "(SELECT id FROM n)"
	switch {
	case spec.ID.Value != nil:
		idValue = w.ph(spec.ID.Value)
	case w.dl == dialect.Postgres:
		t, c := w.ph(spec.Table), w.ph(spec.ID.Column)
		with = "WITH n AS (SELECT nextval(pg_get_serial_sequence(" + t + ", " + c + ")) AS id) "
	default:
		// SQLite assigns max(rowid)+1, or one past the table's sequence
		// with AUTOINCREMENT; the statement takes the write lock before it
		// reads, so no other writer comes in between.
		with = "WITH n AS (SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = " + w.ph(spec.Table) +
			"), 0), coalesce((SELECT max(" + id + ") FROM " + table + "), 0)) + 1 AS id) "
	}
	w.add(spec.ID.Column, idValue)
	for _, f := range spec.Fields {
		switch f.Column {
		case colStatus:
			w.add(f.Column, w.ph("succeeded"))
		case colLease:
			w.add(f.Column, w.ph(d.Expires.UTC()))
		case colClaimed:
			w.add(f.Column, w.ph(d.At.UTC()))
		case colOperation, colCompleted, colResponse:
		default:
			v := f.Value
			if f.Type == field.TypeJSON {
				// As sqlgraph: JSON values are marshalled.
				buf, err := json.Marshal(v)
				if err != nil {
					return fmt.Errorf("marshal value for column %s: %w", f.Column, err)
				}
				v = json.RawMessage(buf)
			}
			w.add(f.Column, w.ph(v))
		}
	}
	for _, e := range spec.Edges {
		w.add(e.Columns[0], w.ph(e.Target.Nodes[0]))
	}
	w.add(colCompleted, w.ph(d.At.UTC()))
	switch {
	case spec.ID.Value != nil:
		w.add(colResponse, w.ph(d.Response))
	case w.dl == dialect.Postgres:
		r, s := w.ph(string(d.Response)), w.ph(sentinel)
		w.add(colResponse, "convert_to(replace("+r+"::text, "+s+"::text, (SELECT id FROM n)::text), 'UTF8')")
	default:
		r, s := w.ph(d.Response), w.ph(sentinel)
		w.add(colResponse, "CAST(replace(CAST("+r+" AS TEXT), "+s+", (SELECT id FROM n)) AS BLOB)")
	}
	if w.text {
		w.query = with + "INSERT INTO " + table + " (" + strings.Join(w.cols, ", ") + ") VALUES (" + strings.Join(w.vals, ", ") +
			") ON CONFLICT (" + quoteAll(conflict) + ") DO NOTHING"
		if spec.ID.Value == nil {
			w.query += " RETURNING " + id // the id the sequence gave
		}
	}
	return nil
}

// quote quotes an SQL identifier; both dialects accept double quotes.
func quote(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

func quoteAll(cols []string) string {
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = quote(c)
	}
	return strings.Join(out, ", ")
}
