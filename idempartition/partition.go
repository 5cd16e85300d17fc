package idempartition

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"entgo.io/ent/dialect"

	"github.com/goovo/idem/idembackend"
	"github.com/goovo/idem/internal/store"
)

// DefaultPartitions is the number of hash partitions ByTenant makes
// of each table when Options.Partitions is zero.
const DefaultPartitions = 8

// Options configures ByTenant.
type Options struct {
	// Partitions is the number of hash partitions of each table (the
	// MODULUS); zero means DefaultPartitions. It cannot be changed later
	// without moving the data.
	Partitions int
	// ScopeColumn is the tenant column of the tables that are not record
	// tables: every other table of the schema that has a column of this
	// name is partitioned by it too. Empty means "tenant_id", the mixin's
	// and the archive's column. Tables without it stay as they are.
	ScopeColumn string
	// Tables adds tables (or overrides the scope column of tables) that
	// are partitioned by the given column: table name → scope column.
	Tables map[string]string
	// Skip lists tables that stay as they are although they have a tenant
	// column. A table that refers to a partitioned table cannot be skipped.
	Skip []string
	// NoIDIndex leaves out the index on the former primary key (id) that
	// each converted table gets by default. Statements that find a row by
	// its id alone (ent's UpdateOne, DeleteOne, Get, edge loading) cannot
	// use the (scope, id) key: without that index they read every row of
	// every partition; with it, they probe each partition's index.
	NoIDIndex bool
	// DryRun runs the conversion in a transaction that is rolled back: the
	// report's Statements are then a migration to copy into a versioned
	// migration directory, and nothing changed.
	DryRun bool
}

// Partitioning reports what ByTenant did.
type Partitioning struct {
	// Partitions is the number of partitions of each converted table.
	Partitions int
	// Tables lists the tables partitioned by tenant, in name order.
	Tables []Table
	// Statements are the statements that were run (or, with DryRun, would
	// have been), in order: the layout as a migration.
	Statements []string
}

// Table describes one table of the partitioned layout.
type Table struct {
	// Table is the table's name; Scope the column it is partitioned by.
	Table, Scope string
	// PrimaryKey lists the primary key's columns: the scope, then the
	// former key.
	PrimaryKey []string
	// Widened names the unique indexes and constraints that did not include
	// the scope and now do: they are unique per tenant from now on
	// (PostgreSQL cannot enforce a unique key across the partitions of a
	// table unless it includes the partition key).
	Widened []string
	// ForeignKeys names the foreign keys of the table that now include the
	// scope on both sides: (scope, fk) → (scope, id).
	ForeignKeys []string
	// IDIndex names the (non-unique) index on the former primary key, made
	// for the statements that find rows by id alone ("" when none was made:
	// Options.NoIDIndex, or a key that already had the scope).
	IDIndex string
	// Existing reports a table that was already hash-partitioned by its
	// scope and was left as it is.
	Existing bool
}

// ByTenant converts the freshly created, empty tables of an ent
// schema on PostgreSQL into tables hash-partitioned by tenant
// (PARTITION BY HASH (scope), opts.Partitions partitions each), so that the
// rows of one tenant live together and a table can grow by partitions, or be
// distributed by tenant (docs/scale-out.md). The claim statements need no
// change: each of them filters by (scope, key).
//
// Which tables: every record table of backend (with its ScopeColumn), every
// other table of the current schema with a column named opts.ScopeColumn
// ("tenant_id": the archive, materialized counts…), and opts.Tables, less
// opts.Skip. Each keeps its columns, types, defaults, identity, checks and
// comments; then
//
//   - its primary key becomes (scope, id), and a plain index on id keeps
//     the lookups by id alone that ent makes (UpdateOne, Get…) from reading
//     every partition (Options.NoIDIndex leaves it out);
//   - every unique index and constraint includes the scope (the mixin's
//     (tenant_id, idempotency_key) and the archive's already do; one that
//     did not is reported in Widened: it is now unique per tenant);
//   - every other index, partial ones included, is recreated as it was;
//   - a foreign key between two partitioned tables becomes composite,
//     (scope, fk) → (scope, id), which also stops a row from referring to
//     another tenant's row; foreign keys to tables that are not partitioned
//     stay as they are.
//
// It reads the catalog, so it works for any ent schema, and runs in one
// transaction: on error nothing changed. It refuses databases other than
// PostgreSQL (12 or later; 15 or later for ON DELETE SET NULL foreign keys),
// tables that hold rows, tables with triggers, row security, inheritance or
// exclusion constraints, and tables without a tenant column that refer to a
// partitioned table. Tables already hash-partitioned by their scope are left
// as they are, so running it again changes nothing.
//
// Run it once, right after ent created the schema. Afterwards ent's automatic
// migration (client.Schema.Create) must not run on the database again: it
// compares the tables with the ent schema, which knows nothing of the
// layout, and would try to undo it. Production uses versioned migrations;
// opts.DryRun returns the DDL to put in one.
func ByTenant(ctx context.Context, backend idembackend.Backend, opts Options) (*Partitioning, error) {
	if backend == nil {
		return nil, errors.New("idempartition: ByTenant: no backend")
	}
	if d := backend.Dialect(); d != dialect.Postgres {
		return nil, fmt.Errorf("idempartition: ByTenant: the database is %q: hash partitioning by tenant needs PostgreSQL", d)
	}
	if opts.Partitions == 0 {
		opts.Partitions = DefaultPartitions
	}
	if opts.Partitions < 1 {
		return nil, fmt.Errorf("idempartition: ByTenant: %d partitions", opts.Partitions)
	}
	if opts.ScopeColumn == "" {
		opts.ScopeColumn = "tenant_id"
	}
	txCtx, tx, err := backend.BeginTx(ctx)
	if err != nil {
		return nil, fmt.Errorf("idempartition: ByTenant: begin: %w", err)
	}
	p := &partitioner{ex: tx, opts: opts, report: &Partitioning{Partitions: opts.Partitions}}
	if err := p.run(txCtx, backend.RecordTables()); err != nil {
		_ = tx.Rollback()
		return nil, fmt.Errorf("idempartition: ByTenant: %w", err)
	}
	if opts.DryRun {
		if err := tx.Rollback(); err != nil {
			return nil, fmt.Errorf("idempartition: ByTenant: roll back the dry run: %w", err)
		}
		return p.report, nil
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("idempartition: ByTenant: commit: %w", err)
	}
	return p.report, nil
}

type partitioner struct {
	ex      idembackend.Executor
	opts    Options
	report  *Partitioning
	version int
	current string // current_schema(): its tables are named without it
}

// ref names a relation in a statement: unqualified in the current schema,
// so that the statements read the same whatever the schema is called (a
// dry run's statements are a migration), qualified elsewhere.
func (p *partitioner) ref(schema, rel string) string {
	if schema == p.current {
		return store.Quote(rel)
	}
	return store.Quote(schema) + "." + store.Quote(rel)
}

// ptable is a table to convert, as the catalog describes it.
type ptable struct {
	oid            uint32
	schema, name   string
	scope          string
	scopeNum       int
	existing       bool
	qualified      string // how statements name it (see ref)
	schemaIdent    string // quote_ident(schema), as pg_get_indexdef writes it
	pkName         string
	pkCols         []string
	reloptions     string
	comment        sql.NullString
	uniqueCons     []uniqueConstraint
	indexes        []index
	grants         []string
	ownedSerials   []ownedSequence
	identitySeqs   []identitySequence
	report         *Table
	partitionNames []string
	tmpName        string   // the new table's name until the old one is dropped
	formerKey      []string // the primary key's columns before, when it lacked the scope
}

type uniqueConstraint struct {
	name, def string
	hasScope  bool
}

type index struct {
	name, def, am string
	unique        bool
	hasScope      bool
}

type ownedSequence struct{ sequence, column string }

type identitySequence struct {
	column, sequence string // sequence: as statements name it
	seqName          string // its bare name
	lastValue        int64
	isCalled         bool
}

type foreignKey struct {
	name                 string
	child, parent        uint32
	cols, refCols        []string
	updType, delType     string
	matchType            string
	deferrable, deferred bool
	delSetCols           []string
	def                  string
}

// run converts the tables in five steps: select which tables, lock them,
// describe them, plan the conversion (every check before any change) and
// apply it.
func (p *partitioner) run(ctx context.Context, records []*idembackend.RecordTable) error {
	if err := p.checkServer(ctx); err != nil {
		return err
	}
	scopes, names, err := p.selectTables(ctx, records)
	if err != nil {
		return err
	}
	if err := p.lock(ctx, names); err != nil {
		return err
	}
	tables, byOID, err := p.describeAll(ctx, names, scopes)
	if err != nil {
		return err
	}
	convert, err := p.toConvert(ctx, tables)
	if err != nil || len(convert) == 0 {
		return err
	}
	fks, rewritten, err := p.plan(ctx, convert, byOID)
	if err != nil {
		return err
	}
	return p.apply(ctx, convert, fks, rewritten)
}

// checkServer reads the server's version and current schema, and refuses
// what cannot hold the layout.
func (p *partitioner) checkServer(ctx context.Context) error {
	var version string
	if err := p.queryRow(ctx, "SELECT version(), current_setting('server_version_num'), COALESCE(current_schema(), '')", nil, &version, &p.version, &p.current); err != nil {
		return err
	}
	if strings.Contains(version, "CockroachDB") {
		return errors.New("the database is CockroachDB, which has no PARTITION BY HASH: see docs/scale-out.md (its tables are split into ranges by primary key)")
	}
	if p.version < 120000 {
		return fmt.Errorf("PostgreSQL %d: foreign keys to partitioned tables need PostgreSQL 12 or later", p.version)
	}
	return nil
}

// selectTables returns which tables to partition, with their scope
// columns (table name as written → scope), and their names in order.
func (p *partitioner) selectTables(ctx context.Context, records []*idembackend.RecordTable) (map[string]string, []string, error) {
	scopes := map[string]string{}
	for _, r := range records {
		scopes[r.Table] = r.ScopeColumn
	}
	var autoTables []string
	if err := p.queryJSON(ctx, `SELECT COALESCE(json_agg(c.relname ORDER BY c.relname), '[]')::text
		FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid
		WHERE c.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema())
		AND c.relkind IN ('r', 'p') AND NOT c.relispartition AND a.attname = $1 AND NOT a.attisdropped`, []any{p.opts.ScopeColumn}, &autoTables); err != nil {
		return nil, nil, err
	}
	for _, t := range autoTables {
		if _, ok := scopes[t]; !ok {
			scopes[t] = p.opts.ScopeColumn
		}
	}
	for t, s := range p.opts.Tables {
		scopes[t] = s
	}
	for _, t := range p.opts.Skip {
		delete(scopes, t)
	}
	names := make([]string, 0, len(scopes))
	for t := range scopes {
		names = append(names, t)
	}
	slices.Sort(names)
	return scopes, names, nil
}

// lock locks the tables first, in name order, before looking at them: no
// row can arrive, and a concurrent conversion of the same tables finishes
// first and is then seen as done. (Not part of the statements: their DDL
// locks anyway.)
func (p *partitioner) lock(ctx context.Context, names []string) error {
	for _, name := range names {
		var exists bool
		if err := p.queryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", []any{store.Quote(name)}, &exists); err != nil {
			return err
		}
		if exists {
			if _, err := p.ex.ExecContext(ctx, "LOCK TABLE "+store.Quote(name)+" IN ACCESS EXCLUSIVE MODE"); err != nil {
				return fmt.Errorf("lock %s: %w", name, err)
			}
		}
	}
	return nil
}

// describeAll describes every table, adds it to the report and returns
// the tables, also by oid.
func (p *partitioner) describeAll(ctx context.Context, names []string, scopes map[string]string) ([]*ptable, map[uint32]*ptable, error) {
	var tables []*ptable
	byOID := map[uint32]*ptable{}
	for _, name := range names {
		t, err := p.describe(ctx, name, scopes[name])
		if err != nil {
			return nil, nil, err
		}
		if byOID[t.oid] != nil {
			return nil, nil, fmt.Errorf("table %s is listed twice", name)
		}
		byOID[t.oid] = t
		tables = append(tables, t)
		p.report.Tables = append(p.report.Tables, Table{Table: t.name, Scope: t.scope, Existing: t.existing})
	}
	for i, t := range tables {
		t.report = &p.report.Tables[i]
	}
	return tables, byOID, nil
}

// toConvert returns the tables not yet partitioned, and reports the keys
// of those that are.
func (p *partitioner) toConvert(ctx context.Context, tables []*ptable) ([]*ptable, error) {
	var convert []*ptable
	for _, t := range tables {
		if !t.existing {
			convert = append(convert, t)
			continue
		}
		if err := p.readKey(ctx, t); err != nil {
			return nil, err
		}
		t.report.PrimaryKey = t.pkCols
	}
	return convert, nil
}

// plan inspects the tables to convert and the foreign keys between them,
// and returns the foreign keys with their new definitions: every check
// before anything changes.
func (p *partitioner) plan(ctx context.Context, convert []*ptable, byOID map[uint32]*ptable) ([]foreignKey, []string, error) {
	for _, t := range convert {
		if err := p.inspect(ctx, t); err != nil {
			return nil, nil, err
		}
	}
	fks, err := p.foreignKeys(ctx, convert)
	if err != nil {
		return nil, nil, err
	}
	var rewritten []string
	for _, fk := range fks {
		child, parent := byOID[fk.child], byOID[fk.parent]
		def, composite, err := p.foreignKeyDDL(ctx, fk, child, parent)
		if err != nil {
			return nil, nil, err
		}
		rewritten = append(rewritten, def)
		if composite {
			child.report.ForeignKeys = append(child.report.ForeignKeys, fk.name)
		}
	}
	return fks, rewritten, nil
}

// apply drops the foreign keys, converts the tables and adds the foreign
// keys back as rewritten.
func (p *partitioner) apply(ctx context.Context, convert []*ptable, fks []foreignKey, rewritten []string) error {
	for _, fk := range fks {
		childName, err := p.relName(ctx, fk.child)
		if err != nil {
			return err
		}
		if err := p.exec(ctx, "ALTER TABLE "+childName+" DROP CONSTRAINT "+store.Quote(fk.name)); err != nil {
			return err
		}
	}
	for _, t := range convert {
		if err := p.convert(ctx, t); err != nil {
			return err
		}
	}
	for _, def := range rewritten {
		if err := p.exec(ctx, def); err != nil {
			return err
		}
	}
	return nil
}

// describe resolves a table name (through search_path, as ent's statements
// do) and reads whether it is already partitioned by its scope.
func (p *partitioner) describe(ctx context.Context, name, scope string) (*ptable, error) {
	t := &ptable{name: name, scope: scope}
	var (
		oid          sql.NullInt64
		kind         string
		partition    bool
		persistence  string
		strategy     sql.NullString
		partAttrs    sql.NullString
		scopeNum     sql.NullInt64
		scopeNotNull sql.NullBool
	)
	err := p.queryRow(ctx, `SELECT c.oid, n.nspname, quote_ident(n.nspname), c.relname, c.relkind::text, c.relispartition, c.relpersistence::text,
		pt.partstrat::text, pt.partattrs::text, a.attnum, a.attnotnull
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		LEFT JOIN pg_partitioned_table pt ON pt.partrelid = c.oid
		LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = $2 AND NOT a.attisdropped AND a.attnum > 0
		WHERE c.oid = to_regclass($1)`, []any{store.Quote(name), scope},
		&oid, &t.schema, &t.schemaIdent, &t.name, &kind, &partition, &persistence, &strategy, &partAttrs, &scopeNum, &scopeNotNull)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("table %s does not exist (create the ent schema first)", name)
	}
	if err != nil {
		return nil, err
	}
	t.oid = uint32(oid.Int64)
	t.qualified = p.ref(t.schema, t.name)
	switch {
	case partition:
		return nil, fmt.Errorf("table %s is a partition of another table", name)
	case !scopeNum.Valid:
		return nil, fmt.Errorf("table %s has no column %s to partition by", name, scope)
	case !scopeNotNull.Bool:
		return nil, fmt.Errorf("table %s: column %s may be NULL; a tenant column must be NOT NULL (or list the table in Skip)", name, scope)
	case kind == "p":
		if strategy.String == "h" && partAttrs.String == strconv.FormatInt(scopeNum.Int64, 10) {
			t.existing = true
			return t, nil
		}
		return nil, fmt.Errorf("table %s is already partitioned, otherwise than by hash of %s", name, scope)
	case kind != "r":
		return nil, fmt.Errorf("%s is not a table (relkind %s)", name, kind)
	case persistence != "p":
		return nil, fmt.Errorf("table %s is unlogged or temporary: partitioned tables are neither", name)
	}
	t.scopeNum = int(scopeNum.Int64)
	return t, nil
}

// inspect reads everything that the conversion must carry over, and
// refuses what it cannot.
func (p *partitioner) inspect(ctx context.Context, t *ptable) error {
	if err := p.refuseUnconvertible(ctx, t); err != nil {
		return err
	}
	for _, read := range []func(context.Context, *ptable) error{
		p.readNewKey, p.readUniqueConstraints, p.readIndexes, p.readGrants, p.readSequences, p.chooseNames,
	} {
		if err := read(ctx, t); err != nil {
			return err
		}
	}
	return nil
}

// refuseUnconvertible refuses a table that holds rows or has what a
// partitioned table cannot carry over, and reads its options and comment.
func (p *partitioner) refuseUnconvertible(ctx context.Context, t *ptable) error {
	var nonEmpty bool
	if err := p.queryRow(ctx, "SELECT EXISTS (SELECT 1 FROM "+t.qualified+")", nil, &nonEmpty); err != nil {
		return err
	}
	if nonEmpty {
		return fmt.Errorf("table %s holds rows: only the empty tables of a new schema are converted (moving data into a partitioned layout is a migration of its own)", t.name)
	}
	var triggers, policies, inherits, exclusions, columnACL int
	var rowSecurity bool
	var reloptions sql.NullString
	if err := p.queryRow(ctx, `SELECT
		(SELECT count(*) FROM pg_trigger WHERE tgrelid = c.oid AND NOT tgisinternal),
		(SELECT count(*) FROM pg_policy WHERE polrelid = c.oid),
		(SELECT count(*) FROM pg_inherits WHERE inhrelid = c.oid OR inhparent = c.oid),
		(SELECT count(*) FROM pg_constraint WHERE conrelid = c.oid AND contype = 'x'),
		(SELECT count(*) FROM pg_attribute WHERE attrelid = c.oid AND attacl IS NOT NULL),
		c.relrowsecurity, array_to_string(c.reloptions, ', '), obj_description(c.oid, 'pg_class')
		FROM pg_class c WHERE c.oid = $1`, []any{t.oid},
		&triggers, &policies, &inherits, &exclusions, &columnACL, &rowSecurity, &reloptions, &t.comment); err != nil {
		return err
	}
	switch {
	case triggers > 0:
		return fmt.Errorf("table %s has triggers: not converted (drop them, convert, create them again)", t.name)
	case policies > 0 || rowSecurity:
		return fmt.Errorf("table %s has row security: not converted", t.name)
	case inherits > 0:
		return fmt.Errorf("table %s takes part in table inheritance: not converted", t.name)
	case exclusions > 0:
		return fmt.Errorf("table %s has an exclusion constraint, which a partitioned table cannot enforce across partitions: not converted", t.name)
	case columnACL > 0:
		return fmt.Errorf("table %s has column privileges: not converted", t.name)
	}
	t.reloptions = reloptions.String
	return nil
}

// readNewKey reads the primary key and makes the new one: the scope, then
// the former key, when the key lacks the scope.
func (p *partitioner) readNewKey(ctx context.Context, t *ptable) error {
	if err := p.readKey(ctx, t); err != nil {
		return err
	}
	if !slices.Contains(t.pkCols, t.scope) {
		t.formerKey = t.pkCols
		t.pkCols = append([]string{t.scope}, t.pkCols...)
	}
	t.report.PrimaryKey = t.pkCols
	return nil
}

// readUniqueConstraints reads the unique constraints (ent makes unique
// indexes, but any schema may have constraints).
func (p *partitioner) readUniqueConstraints(ctx context.Context, t *ptable) error {
	var cons [][]any
	if err := p.queryJSON(ctx, `SELECT COALESCE(json_agg(json_build_array(conname, pg_get_constraintdef(oid), $2 = ANY (conkey)) ORDER BY conname), '[]')::text
		FROM pg_constraint WHERE conrelid = $1 AND contype = 'u'`, []any{t.oid, t.scopeNum}, &cons); err != nil {
		return err
	}
	for _, c := range cons {
		t.uniqueCons = append(t.uniqueCons, uniqueConstraint{name: c[0].(string), def: c[1].(string), hasScope: c[2].(bool)})
	}
	return nil
}

// readIndexes reads the indexes that no constraint owns.
func (p *partitioner) readIndexes(ctx context.Context, t *ptable) error {
	var idx [][]any
	if err := p.queryJSON(ctx, `SELECT COALESCE(json_agg(json_build_array(ic.relname, pg_get_indexdef(i.indexrelid), am.amname, i.indisunique,
			$2 = ANY ((i.indkey::int2[])[0:i.indnkeyatts - 1])) ORDER BY ic.relname), '[]')::text
		FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid JOIN pg_am am ON am.oid = ic.relam
		WHERE i.indrelid = $1 AND NOT EXISTS (SELECT 1 FROM pg_constraint con WHERE con.conindid = i.indexrelid AND con.conrelid = i.indrelid)`, []any{t.oid, t.scopeNum}, &idx); err != nil {
		return err
	}
	for _, c := range idx {
		t.indexes = append(t.indexes, index{name: c[0].(string), def: c[1].(string), am: c[2].(string), unique: c[3].(bool), hasScope: c[4].(bool)})
	}
	return nil
}

// readGrants reads the table's grants to others than its owner.
func (p *partitioner) readGrants(ctx context.Context, t *ptable) error {
	var grants [][]any
	if err := p.queryJSON(ctx, `SELECT COALESCE(json_agg(json_build_array(
			CASE WHEN g.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(pg_get_userbyid(g.grantee)) END, g.privilege_type, g.is_grantable)), '[]')::text
		FROM pg_class c, aclexplode(c.relacl) g WHERE c.oid = $1 AND g.grantee <> c.relowner`, []any{t.oid}, &grants); err != nil {
		return err
	}
	for _, g := range grants {
		s := "GRANT " + g[1].(string) + " ON " + t.qualified + " TO " + g[0].(string)
		if g[2].(bool) {
			s += " WITH GRANT OPTION"
		}
		t.grants = append(t.grants, s)
	}
	return nil
}

// readSequences reads the sequences: serial columns' (owned, kept) and
// identity columns' (made anew by LIKE, renamed and advanced like the old
// ones).
func (p *partitioner) readSequences(ctx context.Context, t *ptable) error {
	var seqs [][]string
	if err := p.queryJSON(ctx, `SELECT COALESCE(json_agg(json_build_array(sn.nspname, a.attname, d.deptype::text, s.relname)), '[]')::text
		FROM pg_depend d JOIN pg_class s ON s.oid = d.objid AND s.relkind = 'S' JOIN pg_namespace sn ON sn.oid = s.relnamespace
		JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
		WHERE d.classid = 'pg_class'::regclass AND d.refclassid = 'pg_class'::regclass AND d.refobjid = $1 AND d.deptype IN ('a', 'i')`, []any{t.oid}, &seqs); err != nil {
		return err
	}
	for _, s := range seqs {
		seq := p.ref(s[0], s[3])
		if s[2] == "a" {
			t.ownedSerials = append(t.ownedSerials, ownedSequence{sequence: seq, column: s[1]})
			continue
		}
		is := identitySequence{column: s[1], sequence: seq, seqName: s[3]}
		if err := p.queryRow(ctx, "SELECT last_value, is_called FROM "+store.Quote(s[0])+"."+store.Quote(s[3]), nil, &is.lastValue, &is.isCalled); err != nil {
			return err
		}
		t.identitySeqs = append(t.identitySeqs, is)
	}
	return nil
}

// chooseNames names the new table, built beside the old one under a name
// of its own, stable so that the statements read the same on every
// database, and its partitions.
func (p *partitioner) chooseNames(ctx context.Context, t *ptable) error {
	t.tmpName = "idem_new_" + t.name
	if len(t.tmpName) > maxIdentifier {
		t.tmpName = "idem_new_" + strconv.FormatUint(uint64(t.oid), 10)
	}
	if err := p.nameIsFree(ctx, t, t.tmpName, "the table it is rebuilt as"); err != nil {
		return err
	}
	for r := range p.opts.Partitions {
		name := t.name + "_p" + strconv.Itoa(r)
		if len(name) > maxIdentifier {
			return fmt.Errorf("table %s: partition name %s is longer than PostgreSQL's %d bytes", t.name, name, maxIdentifier)
		}
		if err := p.nameIsFree(ctx, t, name, "the name of partition "+strconv.Itoa(r)); err != nil {
			return err
		}
		t.partitionNames = append(t.partitionNames, name)
	}
	return nil
}

// maxIdentifier is PostgreSQL's limit on names (NAMEDATALEN - 1 bytes).
const maxIdentifier = 63

func (p *partitioner) nameIsFree(ctx context.Context, t *ptable, name, what string) error {
	var exists bool
	if err := p.queryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", []any{store.Quote(t.schema) + "." + store.Quote(name)}, &exists); err != nil {
		return err
	}
	if exists {
		return fmt.Errorf("table %s: a relation named %s (%s) exists", t.name, name, what)
	}
	return nil
}

// readKey reads the primary key's name and columns.
func (p *partitioner) readKey(ctx context.Context, t *ptable) error {
	var raw string
	err := p.queryRow(ctx, `SELECT con.conname, (SELECT json_agg(a.attname ORDER BY k.ord)
			FROM unnest(con.conkey) WITH ORDINALITY k(num, ord) JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.num)::text
		FROM pg_constraint con WHERE con.conrelid = $1 AND con.contype = 'p'`, []any{t.oid}, &t.pkName, &raw)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("table %s has no primary key", t.name)
	}
	if err != nil {
		return err
	}
	return json.Unmarshal([]byte(raw), &t.pkCols)
}

// foreignKeys lists the foreign keys from or to the tables to convert.
func (p *partitioner) foreignKeys(ctx context.Context, tables []*ptable) ([]foreignKey, error) {
	oids := make([]string, len(tables))
	for i, t := range tables {
		oids[i] = strconv.FormatUint(uint64(t.oid), 10)
	}
	cols := func(rel, keys string) string {
		return `COALESCE((SELECT json_agg(a.attname ORDER BY k.ord) FROM unnest(` + keys + `) WITH ORDINALITY k(num, ord)
			JOIN pg_attribute a ON a.attrelid = ` + rel + ` AND a.attnum = k.num), '[]')`
	}
	delSet := "'[]'::json"
	if p.version >= 150000 {
		delSet = cols("con.conrelid", "con.confdelsetcols")
	}
	var raw string
	err := p.queryRow(ctx, `SELECT COALESCE(json_agg(json_build_array(con.conname, con.conrelid::bigint, con.confrelid::bigint, `+
		cols("con.conrelid", "con.conkey")+`, `+cols("con.confrelid", "con.confkey")+`,
		con.confupdtype, con.confdeltype, con.confmatchtype, con.condeferrable, con.condeferred, `+delSet+`, pg_get_constraintdef(con.oid))
		ORDER BY con.conrelid, con.conname), '[]')::text
		FROM pg_constraint con WHERE con.contype = 'f' AND con.conparentid = 0 AND (con.conrelid IN (`+strings.Join(oids, ", ")+`) OR con.confrelid IN (`+strings.Join(oids, ", ")+`))`,
		nil, &raw)
	if err != nil {
		return nil, err
	}
	var rows [][]json.RawMessage
	if err := json.Unmarshal([]byte(raw), &rows); err != nil {
		return nil, err
	}
	var fks []foreignKey
	for _, r := range rows {
		var fk foreignKey
		for i, dst := range []any{&fk.name, &fk.child, &fk.parent, &fk.cols, &fk.refCols, &fk.updType, &fk.delType, &fk.matchType,
			&fk.deferrable, &fk.deferred, &fk.delSetCols, &fk.def} {
			if err := json.Unmarshal(r[i], dst); err != nil {
				return nil, err
			}
		}
		fks = append(fks, fk)
	}
	return fks, nil
}

// foreignKeyDDL returns the statement that adds fk again once its tables
// are converted, and whether it became composite.
func (p *partitioner) foreignKeyDDL(ctx context.Context, fk foreignKey, child, parent *ptable) (string, bool, error) {
	childName, err := p.relName(ctx, fk.child)
	if err != nil {
		return "", false, err
	}
	if parent == nil {
		// A partitioned table may refer to a table that is not partitioned
		// (a table of reference data): the key stays as it was.
		return "ALTER TABLE " + childName + " ADD CONSTRAINT " + store.Quote(fk.name) + " " + fk.def, false, nil
	}
	parentName := parent.qualified
	if child == nil {
		return "", false, fmt.Errorf("table %s refers to %s (foreign key %s) but has no tenant column: a table that refers to a table partitioned by tenant "+
			"must be partitioned too (give it the tenant column) or lose the foreign key", childName, parentName, fk.name)
	}
	cols, refCols := fk.cols, fk.refCols
	composite := false
	if i := slices.Index(refCols, parent.scope); i < 0 {
		// (scope, fk) → (scope, id): the parent's key now starts with its
		// scope, and the child must be in the same tenant.
		if slices.Contains(cols, child.scope) {
			return "", false, fmt.Errorf("foreign key %s of %s already uses %s for another column of %s: not rewritten", fk.name, child.name, child.scope, parent.name)
		}
		cols = append([]string{child.scope}, cols...)
		refCols = append([]string{parent.scope}, refCols...)
		composite = true
	} else if cols[i] != child.scope {
		return "", false, fmt.Errorf("foreign key %s of %s matches %s.%s with %s, not with its own %s: rows of one tenant would refer to another's", fk.name, child.name, parent.name, parent.scope, cols[i], child.scope)
	}
	s := "ALTER TABLE " + childName + " ADD CONSTRAINT " + store.Quote(fk.name) + " FOREIGN KEY (" + quoteAll(cols) + ") REFERENCES " + parentName + " (" + quoteAll(refCols) + ")"
	if fk.matchType == "f" {
		if len(fk.cols) > 1 {
			return "", false, fmt.Errorf("foreign key %s of %s is MATCH FULL over several columns: with the tenant added it would change meaning; not rewritten", fk.name, child.name)
		}
		// One column: MATCH SIMPLE with the (NOT NULL) scope is the same.
	}
	action := map[string]string{"a": "NO ACTION", "r": "RESTRICT", "c": "CASCADE", "n": "SET NULL", "d": "SET DEFAULT"}
	switch fk.updType {
	case "n", "d":
		if composite {
			return "", false, fmt.Errorf("foreign key %s of %s is ON UPDATE %s, which would also change the tenant: not rewritten", fk.name, child.name, action[fk.updType])
		}
	}
	s += " ON UPDATE " + action[fk.updType] + " ON DELETE " + action[fk.delType]
	if fk.delType == "n" || fk.delType == "d" {
		// Only the key's own columns: the tenant column stays.
		set := fk.delSetCols
		if len(set) == 0 {
			set = fk.cols
		}
		if composite || len(fk.delSetCols) > 0 {
			if p.version < 150000 {
				return "", false, fmt.Errorf("foreign key %s of %s is ON DELETE %s: keeping the tenant column needs PostgreSQL 15 (ON DELETE SET NULL (columns))", fk.name, child.name, action[fk.delType])
			}
			s += " (" + quoteAll(set) + ")"
		}
	}
	if fk.deferrable {
		s += " DEFERRABLE"
		if fk.deferred {
			s += " INITIALLY DEFERRED"
		}
	}
	return s, composite, nil
}

// convert replaces t by a table partitioned by hash of its scope.
func (p *partitioner) convert(ctx context.Context, t *ptable) error {
	for _, step := range []func(context.Context, *ptable) error{
		p.rebuild, p.restoreIdentities, p.addPrimaryKey, p.addIDIndex, p.addUniqueConstraints, p.addIndexes, p.addGrantsAndComment,
	} {
		if err := step(ctx, t); err != nil {
			return err
		}
	}
	return nil
}

// rebuild makes the partitioned table and its partitions beside the old
// table, moves the serials' sequences to it, drops the old table and
// gives the new one its name.
func (p *partitioner) rebuild(ctx context.Context, t *ptable) error {
	tmp := p.ref(t.schema, t.tmpName)
	stmts := []string{
		// Columns, types, NOT NULL, defaults, identity, generated columns,
		// checks, comments, storage and statistics; no indexes (they are
		// made below, with the scope where a partitioned table needs it).
		"CREATE TABLE " + tmp + " (LIKE " + t.qualified + " INCLUDING ALL EXCLUDING INDEXES) PARTITION BY HASH (" + store.Quote(t.scope) + ")",
	}
	with := ""
	if t.reloptions != "" {
		with = " WITH (" + t.reloptions + ")"
	}
	for r, name := range t.partitionNames {
		stmts = append(stmts, fmt.Sprintf("CREATE TABLE %s PARTITION OF %s FOR VALUES WITH (MODULUS %d, REMAINDER %d)%s",
			p.ref(t.schema, name), tmp, p.opts.Partitions, r, with))
	}
	for _, s := range t.ownedSerials {
		// The copied default still draws from the serial's sequence: it
		// moves to the new table before the old one is dropped.
		stmts = append(stmts, "ALTER SEQUENCE "+s.sequence+" OWNED BY "+tmp+"."+store.Quote(s.column))
	}
	stmts = append(stmts,
		"DROP TABLE "+t.qualified,
		"ALTER TABLE "+tmp+" RENAME TO "+store.Quote(t.name),
	)
	for _, s := range stmts {
		if err := p.exec(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

// restoreIdentities gives the identity columns' new sequences the old
// ones' names and positions.
func (p *partitioner) restoreIdentities(ctx context.Context, t *ptable) error {
	for _, is := range t.identitySeqs {
		var seqSchema, seqName string
		if err := p.queryRow(ctx, `SELECT n.nspname, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
			WHERE c.oid = pg_get_serial_sequence($1, $2)::regclass`, []any{store.Quote(t.schema) + "." + store.Quote(t.name), is.column}, &seqSchema, &seqName); err != nil {
			return err
		}
		if err := p.exec(ctx, "ALTER SEQUENCE "+p.ref(seqSchema, seqName)+" RENAME TO "+store.Quote(is.seqName)); err != nil {
			return err
		}
		if is.isCalled {
			if err := p.exec(ctx, fmt.Sprintf("SELECT setval('%s', %d, true)", strings.ReplaceAll(is.sequence, "'", "''"), is.lastValue)); err != nil {
				return err
			}
		}
	}
	return nil
}

// addPrimaryKey adds the new primary key: the scope, then the former key.
func (p *partitioner) addPrimaryKey(ctx context.Context, t *ptable) error {
	return p.exec(ctx, "ALTER TABLE "+t.qualified+" ADD CONSTRAINT "+store.Quote(t.pkName)+" PRIMARY KEY ("+quoteAll(t.pkCols)+")")
}

// addIDIndex adds the index on the former primary key, for the statements
// that find rows by id alone (Options.NoIDIndex leaves it out). Not unique:
// a partitioned table cannot enforce that without the scope; the ids stay
// unique because their sequence (or UUID generator) makes them so, as it
// did before.
func (p *partitioner) addIDIndex(ctx context.Context, t *ptable) error {
	if len(t.formerKey) == 0 || p.opts.NoIDIndex {
		return nil
	}
	name := t.name + "_" + strings.Join(t.formerKey, "_") + "_idx"
	var free bool
	if len(name) <= maxIdentifier {
		if err := p.queryRow(ctx, "SELECT to_regclass($1) IS NULL", []any{store.Quote(t.schema) + "." + store.Quote(name)}, &free); err != nil {
			return err
		}
	}
	stmt := "CREATE INDEX ON " + t.qualified + " (" + quoteAll(t.formerKey) + ")" // PostgreSQL names it
	if free {
		stmt = "CREATE INDEX " + store.Quote(name) + " ON " + t.qualified + " (" + quoteAll(t.formerKey) + ")"
	}
	if err := p.exec(ctx, stmt); err != nil {
		return err
	}
	if !free {
		if err := p.queryRow(ctx, `SELECT ic.relname FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid
			WHERE i.indrelid = $1::regclass ORDER BY ic.oid DESC LIMIT 1`, []any{store.Quote(t.schema) + "." + store.Quote(t.name)}, &name); err != nil {
			return err
		}
	}
	t.report.IDIndex = name
	return nil
}

// addUniqueConstraints adds the unique constraints back, each widened by
// the scope when it lacked it.
func (p *partitioner) addUniqueConstraints(ctx context.Context, t *ptable) error {
	for _, u := range t.uniqueCons {
		def := u.def
		if !u.hasScope {
			def, _ = insertAfterParen(def, store.Quote(t.scope)+", ")
			t.report.Widened = append(t.report.Widened, u.name)
		}
		if err := p.exec(ctx, "ALTER TABLE "+t.qualified+" ADD CONSTRAINT "+store.Quote(u.name)+" "+def); err != nil {
			return err
		}
	}
	return nil
}

// addIndexes adds the indexes back as they were, a unique one widened by
// the scope when it lacked it.
func (p *partitioner) addIndexes(ctx context.Context, t *ptable) error {
	for _, ix := range t.indexes {
		def := ix.def
		if t.schema == p.current {
			// pg_get_indexdef names the table with its schema.
			def = strings.Replace(def, " ON "+t.schemaIdent+".", " ON ", 1)
		}
		if ix.unique && !ix.hasScope {
			// pg_get_indexdef: CREATE UNIQUE INDEX name ON table USING am (cols) …
			marker := " USING " + ix.am + " ("
			i := strings.Index(def, marker)
			if i < 0 {
				return fmt.Errorf("index %s: unexpected definition %q", ix.name, def)
			}
			i += len(marker)
			def = def[:i] + store.Quote(t.scope) + ", " + def[i:]
			t.report.Widened = append(t.report.Widened, ix.name)
		}
		if err := p.exec(ctx, def); err != nil {
			return err
		}
	}
	return nil
}

// addGrantsAndComment grants what was granted on the old table, and
// comments the new one as the old one was.
func (p *partitioner) addGrantsAndComment(ctx context.Context, t *ptable) error {
	for _, g := range t.grants {
		if err := p.exec(ctx, g); err != nil {
			return err
		}
	}
	if t.comment.Valid {
		if err := p.exec(ctx, "COMMENT ON TABLE "+t.qualified+" IS "+quoteLiteral(t.comment.String)); err != nil {
			return err
		}
	}
	return nil
}

func insertAfterParen(def, text string) (string, bool) {
	i := strings.Index(def, "(")
	if i < 0 {
		return def, false
	}
	return def[:i+1] + text + def[i+1:], true
}

func (p *partitioner) relName(ctx context.Context, oid uint32) (string, error) {
	var name string
	var schema string
	err := p.queryRow(ctx, "SELECT n.nspname, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = $1", []any{oid}, &schema, &name)
	return p.ref(schema, name), err
}

func (p *partitioner) exec(ctx context.Context, stmt string) error {
	if _, err := p.ex.ExecContext(ctx, stmt); err != nil {
		return fmt.Errorf("%s: %w", stmt, err)
	}
	p.report.Statements = append(p.report.Statements, stmt)
	return nil
}

// queryRow reads one row into dest; sql.ErrNoRows when there is none.
func (p *partitioner) queryRow(ctx context.Context, query string, args []any, dest ...any) error {
	rows, err := p.ex.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return err
		}
		return sql.ErrNoRows
	}
	if err := rows.Scan(dest...); err != nil {
		return err
	}
	return rows.Close()
}

// queryJSON runs a query that returns one JSON text (json_agg) and decodes
// it into dest.
func (p *partitioner) queryJSON(ctx context.Context, query string, args []any, dest any) error {
	var raw string
	if err := p.queryRow(ctx, query, args, &raw); err != nil {
		return err
	}
	return json.Unmarshal([]byte(raw), dest)
}

func quoteAll(idents []string) string {
	q := make([]string, len(idents))
	for i, s := range idents {
		q[i] = store.Quote(s)
	}
	return strings.Join(q, ", ")
}

func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
