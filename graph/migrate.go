package graph

import (
	"context"
	"fmt"
	"sync"

	"github.com/goovo/idem/ent"
	"github.com/goovo/idem/idemdb"
)

// entSchema serialises ent's migrations within a process: ent's Atlas
// migration writes the package's table descriptions (ent/migrate.Tables)
// as it runs, so two at once in one process race on them. Processes are
// serialised by idemdb.MigrateLocked.
var entSchema sync.Mutex

// Migrate is the server's automatic migration (-migrate): ent's tables,
// then River's (on MySQL the receipt table: MigrateOutbox), under idemdb.MigrateLocked, so that servers started at the
// same moment on an empty database all start.
func Migrate(ctx context.Context, client *ent.Client, drv idemdb.Driver) error {
	err := idemdb.MigrateLocked(ctx, drv, func(ctx context.Context) error {
		entSchema.Lock()
		err := client.Schema.Create(ctx)
		entSchema.Unlock()
		if err != nil {
			return err
		}
		return MigrateOutbox(ctx, drv)
	})
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}
