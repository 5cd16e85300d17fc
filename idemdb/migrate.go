package idemdb

import (
	"context"
	"errors"
	"fmt"
	"time"

	"entgo.io/ent/dialect"

	"github.com/goovo/idem/internal/timer"
)

// migrationLockKey names PostgreSQL's advisory lock around automatic
// migrations, with the schema (current_schema()) appended: one schema's
// migration never waits for another's.
const migrationLockKey = "idem-migrate:"

// sqliteMigrationTries is how often MigrateLocked runs a SQLite migration
// that fails: each later run finds what a concurrent one made.
const sqliteMigrationTries = 10

// MigrateLocked runs migrate, the automatic migration at start (ent's
// client.Schema.Create, idemoutbox.Migrate), so that several processes
// started at the same moment on an empty database all succeed: without it,
// two of them create one table at once and all but one fail (PostgreSQL:
// duplicate key value violates unique constraint
// "pg_type_typname_nsp_index").
//
// On PostgreSQL, migrate runs under a transaction's advisory lock of the
// URL's schema, held by a transaction of its own (the pool needs two
// connections), which also holds behind PgBouncer in transaction pooling
// mode: the next process waits, as long as ctx allows, and then finds
// nothing to do.
// On MySQL and MariaDB, migrate runs under the database's named lock
// (GET_LOCK), held by a connection of its own.
// SQLite's write lock serialises each statement, not a migration: a run
// that loses a race to another process fails on a table that process just
// made, so it runs again (a few times, while ctx allows) and finds it made.
func MigrateLocked(ctx context.Context, drv Driver, migrate func(context.Context) error) error {
	if drv.Dialect() == dialect.MySQL {
		return mysqlMigrationLock(ctx, drv, migrate)
	}
	if drv.Dialect() != dialect.Postgres {
		var err error
		for try := range sqliteMigrationTries {
			if err = migrate(ctx); err == nil {
				return nil
			}
			if werr := timer.Sleep(ctx, time.Duration(try+1)*20*time.Millisecond); werr != nil {
				return errors.Join(err, werr)
			}
		}
		return err
	}
	// A transaction's advisory lock, not a session's: behind PgBouncer in
	// transaction pooling mode a session lock and its unlock may reach
	// two server connections, leaving the lock held for ever on the first
	// (the next start then waited on it); a transaction keeps its server
	// connection, and its lock ends with it, on a crash too.
	tx, err := drv.DB().BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("idemdb: migration lock: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock(hashtext($1 || current_schema()))", migrationLockKey); err != nil {
		return fmt.Errorf("idemdb: migration lock: %w", err)
	}
	return migrate(ctx)
}
