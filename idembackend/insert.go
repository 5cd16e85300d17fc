package idembackend

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"

	"entgo.io/ent/dialect"
	"entgo.io/ent/dialect/sql"
	"entgo.io/ent/dialect/sql/sqlgraph"
	"entgo.io/ent/schema/field"
)

// ClaimInsert is the claim INSERT of one record table,
//
//	INSERT INTO t (…) VALUES (…) ON CONFLICT (scope, idempotency_key) DO NOTHING RETURNING id
//
// built once per dialect and set of columns and kept, where ent's
// sqlgraph.CreateNode builds it again for every claim (quoting each
// column, a placeholder per value: about 40 allocations of a claim's).
// Generated code keeps one per record table and calls Create from the
// claim's save, after ent's defaults, hooks and validators, as ent's own
// Save would call sqlgraph.CreateNode.
type ClaimInsert struct {
	// Conflict lists the columns of the unique index that decides who
	// owns a key: the scope column, then idempotency_key.
	Conflict []string

	// built holds the statements built so far, copied on write: a table
	// has one or a few column sets (optional fields set or not).
	built atomic.Pointer[[]*claimStatement]
	// completed holds CreateCompleted's statements, as built holds
	// Create's.
	completed atomic.Pointer[[]*claimStatement]
}

// maxClaimStatements bounds the statements a ClaimInsert keeps; past it a
// new column set replaces the oldest.
const maxClaimStatements = 8

// claimStatement is the text of one claim INSERT and what it was built for.
type claimStatement struct {
	dialect  string
	table    string
	columns  []string // in the order of the statement's placeholders
	idColumn string
	query    string
}

// Create inserts the row of spec as sqlgraph.CreateNode does with
// ON CONFLICT (Conflict) DO NOTHING, and sets spec.ID.Value to the row's
// id; it returns sql.ErrNoRows, as ent does, when the key is taken.
//
// A spec the prebuilt statement cannot express (edges stored outside the
// row, a schema other than the connection's) goes to
// sqlgraph.CreateNode with the same conflict clause.
func (ci *ClaimInsert) Create(ctx context.Context, drv dialect.Driver, spec *sqlgraph.CreateSpec) error {
	if drv.Dialect() == dialect.MySQL {
		return ci.createMySQL(ctx, drv, spec)
	}
	if !rowOnly(spec) {
		spec.OnConflict = []sql.ConflictOption{sql.ConflictColumns(ci.Conflict...), sql.DoNothing()}
		return sqlgraph.CreateNode(ctx, drv, spec)
	}
	stmt, err := ci.statement(drv.Dialect(), spec)
	if err != nil {
		return err
	}
	args, err := claimArgs(spec)
	if err != nil {
		return err
	}
	rows := &sql.Rows{}
	if err := drv.Query(ctx, stmt.query, args, rows); err != nil {
		return err
	}
	defer rows.Close()
	// The id, scanned as sqlgraph scans it (insertLastID).
	switch _, ok := spec.ID.Value.(field.ValueScanner); {
	case ok:
		return sql.ScanOne(rows, spec.ID.Value)
	case spec.ID.Type.Numeric():
		id, err := sql.ScanInt64(rows)
		if err != nil {
			return err
		}
		spec.ID.Value = id
		return nil
	default:
		return sql.ScanOne(rows, &spec.ID.Value)
	}
}

// claimArgs are the values of spec in the order of a claim statement's
// columns (claimStatement.columns).
func claimArgs(spec *sqlgraph.CreateSpec) ([]any, error) {
	args := make([]any, 0, len(spec.Fields)+len(spec.Edges)+1)
	for _, f := range spec.Fields {
		v := f.Value
		if f.Type == field.TypeJSON {
			// As sqlgraph: JSON values are marshalled, and drivers without
			// a JSON type store the bytes.
			buf, err := json.Marshal(v)
			if err != nil {
				return nil, fmt.Errorf("marshal value for column %s: %w", f.Column, err)
			}
			v = json.RawMessage(buf)
		}
		args = append(args, v)
	}
	for _, e := range spec.Edges {
		args = append(args, e.Target.Nodes[0])
	}
	if spec.ID.Value != nil {
		args = append(args, spec.ID.Value)
	}
	return args, nil
}

// rowOnly reports whether spec writes its own row and nothing else: every
// edge is a foreign key of the row (M2O), and the table is in the
// connection's schema.
func rowOnly(spec *sqlgraph.CreateSpec) bool {
	if spec.ID == nil || spec.Schema != "" {
		return false
	}
	for _, e := range spec.Edges {
		if e.Rel != sqlgraph.M2O || len(e.Columns) != 1 || e.Target == nil || len(e.Target.Nodes) != 1 {
			return false
		}
	}
	return true
}

// statement returns the claim INSERT of spec's columns, building it the
// first time.
func (ci *ClaimInsert) statement(d string, spec *sqlgraph.CreateSpec) (*claimStatement, error) {
	return kept(&ci.built, d, spec, ci.build)
}

// kept returns the statement of built for spec's dialect and columns,
// building it with build the first time. Two requests that build the same
// statement at once both keep theirs: equal texts, one wasted.
func kept(built *atomic.Pointer[[]*claimStatement], d string, spec *sqlgraph.CreateSpec, build func(string, *sqlgraph.CreateSpec) (*claimStatement, error)) (*claimStatement, error) {
	var have []*claimStatement
	if p := built.Load(); p != nil {
		have = *p
	}
	for _, s := range have {
		if s.matches(d, spec) {
			return s, nil
		}
	}
	s, err := build(d, spec)
	if err != nil {
		return nil, err
	}
	next := make([]*claimStatement, 0, len(have)+1)
	if len(have) >= maxClaimStatements {
		have = have[1:]
	}
	next = append(append(next, have...), s)
	built.Store(&next)
	return s, nil
}

// columnsOf lists spec's columns in the order claimStatement.matches
// compares them: the fields, the edges' foreign keys, and the id when it
// is known.
func columnsOf(spec *sqlgraph.CreateSpec) []string {
	cols := make([]string, 0, len(spec.Fields)+len(spec.Edges)+1)
	for _, f := range spec.Fields {
		cols = append(cols, f.Column)
	}
	for _, e := range spec.Edges {
		cols = append(cols, e.Columns[0])
	}
	if spec.ID.Value != nil {
		cols = append(cols, spec.ID.Column)
	}
	return cols
}

// build writes the statement with ent's SQL builder, as sqlgraph would for
// this spec, with a placeholder for every value.
func (ci *ClaimInsert) build(d string, spec *sqlgraph.CreateSpec) (*claimStatement, error) {
	s := &claimStatement{dialect: d, table: spec.Table, idColumn: spec.ID.Column, columns: columnsOf(spec)}
	insert := sql.Dialect(d).Insert(spec.Table)
	for _, c := range s.columns {
		// Any value but nil, which the builder writes as NULL, gets a
		// placeholder; the values are the claim's, at each Create.
		insert.Set(c, 0)
	}
	if d != dialect.MySQL {
		// MySQL has no ON CONFLICT: see createMySQL.
		insert.OnConflict(sql.ConflictColumns(ci.Conflict...), sql.DoNothing()).Returning(spec.ID.Column)
	}
	query, _, err := insert.QueryErr()
	if err != nil {
		return nil, fmt.Errorf("idembackend: build the claim INSERT of %s: %w", spec.Table, err)
	}
	s.query = query
	return s, nil
}

// matches reports whether s was built for spec's dialect, table and
// columns, in order.
func (s *claimStatement) matches(d string, spec *sqlgraph.CreateSpec) bool {
	n := len(spec.Fields) + len(spec.Edges)
	if spec.ID.Value != nil {
		n++
	}
	if s.dialect != d || s.table != spec.Table || s.idColumn != spec.ID.Column || len(s.columns) != n {
		return false
	}
	i := 0
	for _, f := range spec.Fields {
		if s.columns[i] != f.Column {
			return false
		}
		i++
	}
	for _, e := range spec.Edges {
		if s.columns[i] != e.Columns[0] {
			return false
		}
		i++
	}
	return spec.ID.Value == nil || s.columns[i] == spec.ID.Column
}
