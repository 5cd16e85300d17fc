package graph_test

import (
	"context"
	"testing"

	"github.com/goovo/idem/ent"
	"github.com/goovo/idem/graph"
	"github.com/goovo/idem/idemdb"
	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/testkit"
)

// Servers started at the same moment on an empty database each migrate
// automatically: every one of them must start (issue 31: the second
// failed on PostgreSQL with pg_type_typname_nsp_index, two CREATE TABLEs
// of one name racing).
func TestConcurrentFirstMigrationsAllSucceed(t *testing.T) {
	for _, backend := range []idemtest.Kind{idemtest.SQLite, idemtest.Postgres} {
		t.Run(string(backend), func(t *testing.T) {
			db := idemtest.Open(t, backend)
			migrate := func(ctx context.Context, drv idemdb.Driver) error {
				return graph.Migrate(ctx, ent.NewClient(ent.Driver(drv)), drv)
			}
			drivers := testkit.MigrateAtOnce(t, db.DSN, 4, migrate)
			// And the tables are usable: a second round migrates nothing
			// and fails nothing.
			if err := migrate(context.Background(), drivers[0]); err != nil {
				t.Fatal(err)
			}
		})
	}
}
