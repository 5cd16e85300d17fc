package testapp_test

import (
	"context"
	"testing"

	atlas "ariga.io/atlas/sql/schema"
	"entgo.io/ent/dialect/sql/schema"

	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/testkit/testapp/ent"
)

// ent's automatic migration finds nothing to change on a database it made:
// the mixin's partial indexes are written the way PostgreSQL prints them
// back, so a server that migrates at start does not rebuild them (which
// would block writes) every time.
func TestAutoMigrationIsStable(t *testing.T) {
	for _, b := range []idemtest.Kind{idemtest.SQLite, idemtest.Postgres} {
		// Not parallel: ent's Schema.Create writes the generated package's
		// shared table descriptions.
		t.Run(string(b), func(t *testing.T) {
			db := idemtest.Open(t, b)
			client := ent.NewClient(ent.Driver(db.Driver))
			ctx := context.Background()
			if err := client.Schema.Create(ctx); err != nil {
				t.Fatal(err)
			}
			var changes []atlas.Change
			hook := func(next schema.Differ) schema.Differ {
				return schema.DiffFunc(func(current, desired *atlas.Schema) ([]atlas.Change, error) {
					c, err := next.Diff(current, desired)
					changes = append(changes, c...)
					return c, err
				})
			}
			if err := client.Schema.Create(ctx, schema.WithDiffHook(hook)); err != nil {
				t.Fatal(err)
			}
			for _, c := range changes {
				if m, ok := c.(*atlas.ModifyTable); ok {
					for _, mc := range m.Changes {
						if ai, ok := mc.(*atlas.AddIndex); ok {
							t.Errorf("table %s: add index %s unique=%v", m.T.Name, ai.I.Name, ai.I.Unique)
							continue
						}
						t.Errorf("table %s: %T %+v", m.T.Name, mc, mc)
					}
					continue
				}
				t.Errorf("change %T %+v", c, c)
			}
		})
	}
}
