// Package idempartition lays out an ent schema's PostgreSQL tables for
// growth by tenant: ByTenant converts freshly created, empty tables into
// tables hash-partitioned by their tenant column, with keys, unique indexes
// and foreign keys that carry the tenant (docs/scale-out.md). It reads the
// catalog, so it works for any ent schema, and needs of the application only
// its generated backend (client.IdempotencyBackend()).
//
//	if err := client.Schema.Create(ctx); err != nil { // ent makes the tables
//		return err
//	}
//	p, err := idempartition.ByTenant(ctx, client.IdempotencyBackend(),
//		idempartition.Options{Partitions: 16}) // then partition them
//
// Run it once, right after ent created the schema; with Options.DryRun its
// report's Statements are a versioned migration instead.
package idempartition
