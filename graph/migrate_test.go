package graph_test

import (
	"context"
	"sync"
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
	const servers = 4
	for _, backend := range []idemtest.Kind{idemtest.SQLite, idemtest.Postgres} {
		t.Run(string(backend), func(t *testing.T) {
			db := idemtest.Open(t, backend)
			ctx := t.Context()
			clients := make([]*ent.Client, servers)
			drivers := make([]idemdb.Driver, servers)
			for i := range clients {
				// A pool of its own each, as separate processes have.
				drv, err := idemdb.Open(db.DSN)
				if err != nil {
					t.Fatal(err)
				}
				drivers[i], clients[i] = drv, ent.NewClient(ent.Driver(drv))
				testkit.CloseInCleanup(t, "client", func() { _ = clients[i].Close() })
			}
			errs := make([]error, servers)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range clients {
				wg.Go(func() {
					<-start
					errs[i] = graph.Migrate(ctx, clients[i], drivers[i])
				})
			}
			close(start)
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Errorf("server %d of %d: %v", i+1, servers, err)
				}
			}
			// And the tables are usable: a second round migrates nothing
			// and fails nothing.
			if err := graph.Migrate(context.Background(), clients[0], drivers[0]); err != nil {
				t.Fatal(err)
			}
		})
	}
}
