package idembackend_test

import (
	"context"
	stdsql "database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"sync"
	"testing"

	"entgo.io/ent/dialect/sql/sqlgraph"
	"entgo.io/ent/schema/field"

	"github.com/goovo/idem/idembackend"
	"github.com/goovo/idem/idemtest"
)

// claimTables makes a record table and a table whose rows point to a
// record (an O2M edge seen from the record, stored in the other table).
func claimTables(t *testing.T, db *idemtest.DB) {
	t.Helper()
	id, meta, text, noValues := "integer PRIMARY KEY AUTOINCREMENT", "json", "text", "DEFAULT VALUES"
	switch {
	case db.Kind.IsPostgres():
		id, meta = "serial PRIMARY KEY", "jsonb"
	case db.Kind == idemtest.MariaDB:
		// MySQL indexes no text without a length, and names an index as
		// ent does (the claim's duplicate is told by its index's name).
		id, text, noValues = "integer PRIMARY KEY AUTO_INCREMENT", "varchar(255)", "() VALUES ()"
	}
	for _, ddl := range []string{
		`CREATE TABLE parents (id ` + id + `)`,
		`CREATE TABLE claims (id ` + id + `, scope ` + text + ` NOT NULL, idempotency_key ` + text + `, note ` + text + `, meta ` + meta + `,
			parent_id integer REFERENCES parents(id),
			CONSTRAINT claims_scope_idempotency_key UNIQUE (scope, idempotency_key), CONSTRAINT claims_note UNIQUE (note))`,
		`CREATE TABLE items (id ` + id + `, claim_id integer REFERENCES claims(id))`,
		`INSERT INTO parents ` + noValues,
		`INSERT INTO items (claim_id) VALUES (NULL)`,
	} {
		if _, err := db.Driver.DB().ExecContext(context.Background(), ddl); err != nil {
			t.Fatalf("%s: %v", ddl, err)
		}
	}
}

// claimKinds are the databases of the claim INSERT's tests: each
// dialect once.
var claimKinds = []idemtest.Kind{idemtest.SQLite, idemtest.Postgres, idemtest.MariaDB}

// claimSpec is the spec ent's createSpec would make for a claim of key,
// with the optional fields given.
func claimSpec(key string, note *string, meta map[string]any, parent, item int) *sqlgraph.CreateSpec {
	spec := sqlgraph.NewCreateSpec("claims", sqlgraph.NewFieldSpec("id", field.TypeInt))
	spec.SetField("scope", field.TypeString, "tenant")
	spec.SetField("idempotency_key", field.TypeString, key)
	if note != nil {
		spec.SetField("note", field.TypeString, *note)
	}
	if meta != nil {
		spec.SetField("meta", field.TypeJSON, meta)
	}
	if parent != 0 {
		spec.Edges = append(spec.Edges, &sqlgraph.EdgeSpec{Rel: sqlgraph.M2O, Inverse: true, Table: "claims", Columns: []string{"parent_id"},
			Target: &sqlgraph.EdgeTarget{Nodes: []driver.Value{parent}, IDSpec: sqlgraph.NewFieldSpec("id", field.TypeInt)}})
	}
	if item != 0 {
		spec.Edges = append(spec.Edges, &sqlgraph.EdgeSpec{Rel: sqlgraph.O2M, Table: "items", Columns: []string{"claim_id"},
			Target: &sqlgraph.EdgeTarget{Nodes: []driver.Value{item}, IDSpec: sqlgraph.NewFieldSpec("id", field.TypeInt)}})
	}
	return spec
}

type claimRow struct {
	id           int64
	note, meta   stdsql.NullString
	parent, item stdsql.NullInt64
}

func readClaim(t *testing.T, db *idemtest.DB, key string) claimRow {
	t.Helper()
	var r claimRow
	err := db.Driver.DB().QueryRowContext(context.Background(),
		`SELECT c.id, c.note, c.meta, c.parent_id, (SELECT min(i.id) FROM items i WHERE i.claim_id = c.id)
		 FROM claims c WHERE c.scope = 'tenant' AND c.idempotency_key = '`+key+`'`).
		Scan(&r.id, &r.note, &r.meta, &r.parent, &r.item)
	if err != nil {
		t.Fatalf("read the claim of %s: %v", key, err)
	}
	return r
}

// TestClaimInsert checks the prebuilt claim INSERT against what ent's
// Create would write: the values in their columns whatever optional fields
// a claim sets (each set of columns its own statement), the row's id, a
// taken key reported as sql.ErrNoRows, JSON marshalled, a foreign key of
// the row written with it, and an edge stored in another table still
// written (through sqlgraph.CreateNode) with the same conflict rule; a
// conflict on another unique index is an error, never a taken key.
func TestClaimInsert(t *testing.T) {
	for _, backend := range claimKinds {
		t.Run(string(backend), func(t *testing.T) {
			ctx := context.Background()
			db := idemtest.Open(t, backend)
			claimTables(t, db)
			ins := &idembackend.ClaimInsert{Conflict: []string{"scope", "idempotency_key"}}
			note := "first"

			full := claimSpec("full", &note, map[string]any{"a": 1}, 1, 0)
			if err := ins.Create(ctx, db.Driver, full); err != nil {
				t.Fatal(err)
			}
			if full.ID.Value == nil {
				t.Fatal("no id read back")
			}
			bare := claimSpec("bare", nil, nil, 0, 0)
			if err := ins.Create(ctx, db.Driver, bare); err != nil {
				t.Fatal(err)
			}
			again := "again"
			if err := ins.Create(ctx, db.Driver, claimSpec("again", &again, map[string]any{"b": "x"}, 1, 0)); err != nil {
				t.Fatal(err)
			}
			other := "other"
			if err := ins.Create(ctx, db.Driver, claimSpec("full", &other, nil, 0, 0)); !errors.Is(err, stdsql.ErrNoRows) {
				t.Fatalf("a taken key: got %v, want sql.ErrNoRows", err)
			}
			// A conflict on another unique index is the input's, never
			// "taken": on MySQL too, where the claim is a plain INSERT.
			if err := ins.Create(ctx, db.Driver, claimSpec("new", &note, nil, 0, 0)); err == nil || errors.Is(err, stdsql.ErrNoRows) || !sqlgraph.IsUniqueConstraintError(err) {
				t.Fatalf("a note that is taken: got %v, want a unique constraint error", err)
			}
			if err := ins.Create(ctx, db.Driver, claimSpec("edge", nil, nil, 0, 1)); err != nil {
				t.Fatal(err)
			}
			if err := ins.Create(ctx, db.Driver, claimSpec("edge", nil, nil, 0, 1)); !errors.Is(err, stdsql.ErrNoRows) {
				t.Fatalf("a taken key through CreateNode: got %v, want sql.ErrNoRows", err)
			}

			if r := readClaim(t, db, "full"); r.id != full.ID.Value.(int64) || r.note.String != "first" || !r.parent.Valid || r.parent.Int64 != 1 || !jsonIs(r.meta.String, `{"a":1}`) {
				t.Errorf("full: %+v (id %v)", r, full.ID.Value)
			}
			if r := readClaim(t, db, "bare"); r.id != bare.ID.Value.(int64) || r.note.Valid || r.meta.Valid || r.parent.Valid {
				t.Errorf("bare: %+v", r)
			}
			if r := readClaim(t, db, "again"); r.note.String != "again" || !jsonIs(r.meta.String, `{"b":"x"}`) || r.parent.Int64 != 1 {
				t.Errorf("again: %+v", r)
			}
			if r := readClaim(t, db, "edge"); !r.item.Valid || r.item.Int64 != 1 {
				t.Errorf("edge: the item does not point to the claim: %+v", r)
			}
		})
	}
}

// TestClaimInsertConcurrent sends claims of two column sets at once, all
// but one for keys of their own and the rest for one shared key, through
// one ClaimInsert: every row holds its own values and the shared key has
// one owner. With -race it checks the statements' copy on write.
func TestClaimInsertConcurrent(t *testing.T) {
	for _, backend := range claimKinds {
		t.Run(string(backend), func(t *testing.T) {
			ctx := context.Background()
			db := idemtest.Open(t, backend)
			claimTables(t, db)
			ins := &idembackend.ClaimInsert{Conflict: []string{"scope", "idempotency_key"}}
			const n = 24
			var (
				wg   sync.WaitGroup
				mu   sync.Mutex
				won  int
				errs []error
			)
			for i := range n {
				wg.Go(func() {
					var note *string
					if i%2 == 0 {
						s := fmt.Sprint("note-", i)
						note = &s
					}
					key := fmt.Sprint("key-", i)
					if i%3 == 0 {
						key = "shared"
					}
					err := ins.Create(ctx, db.Driver, claimSpec(key, note, nil, 0, 0))
					mu.Lock()
					defer mu.Unlock()
					switch {
					case err == nil && key == "shared":
						won++
					case err != nil && !(key == "shared" && errors.Is(err, stdsql.ErrNoRows)):
						errs = append(errs, err)
					}
				})
			}
			wg.Wait()
			if len(errs) > 0 || won != 1 {
				t.Fatalf("the shared key had %d owners (want 1); errors: %v", won, errs)
			}
			for i := range n {
				if i%3 == 0 {
					continue
				}
				r := readClaim(t, db, fmt.Sprint("key-", i))
				if want := fmt.Sprint("note-", i); (i%2 == 0) != r.note.Valid || (r.note.Valid && r.note.String != want) {
					t.Errorf("key-%d: note %+v", i, r.note)
				}
			}
		})
	}
}

// jsonIs compares JSON texts ignoring the spaces PostgreSQL's jsonb adds.
func jsonIs(got, want string) bool {
	strip := func(s string) string {
		out := make([]rune, 0, len(s))
		for _, r := range s {
			if r != ' ' {
				out = append(out, r)
			}
		}
		return string(out)
	}
	return strip(got) == strip(want)
}
