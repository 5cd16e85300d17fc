package graph

import (
	"context"
	"fmt"

	"github.com/goovo/idem/ent"
	"github.com/goovo/idem/idemdb"
)

// Migrate is the server's automatic migration (-migrate): ent's tables,
// then River's, under idemdb.MigrateLocked, so that servers started at the
// same moment on an empty database all start.
func Migrate(ctx context.Context, client *ent.Client, drv idemdb.Driver) error {
	err := idemdb.MigrateLocked(ctx, drv, func(ctx context.Context) error {
		if err := client.Schema.Create(ctx); err != nil {
			return err
		}
		return MigrateRiver(ctx, drv)
	})
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}
