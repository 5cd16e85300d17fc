package idemoutbox

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/riverqueue/river/riverdriver/riverdatabasesql"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
)

// Migrate creates or updates River's tables in db (dialect "postgres" or
// "sqlite3", as ent names them) to the River version this module
// requires: the automatic path, beside ent's Schema.Create. A deployment
// that applies versioned migrations instead applies River's with them
// (cmd/migrate's files).
func Migrate(ctx context.Context, db *sql.DB, dialect string) error {
	var (
		m   *rivermigrate.Migrator[*sql.Tx]
		err error
	)
	switch dialect {
	case "sqlite3":
		m, err = rivermigrate.New(riversqlite.New(db), nil)
	case "postgres":
		m, err = rivermigrate.New(riverdatabasesql.New(db), nil)
	default:
		return fmt.Errorf("idemoutbox: unsupported dialect %q", dialect)
	}
	if err == nil {
		_, err = m.Migrate(ctx, rivermigrate.DirectionUp, nil)
	}
	if err != nil {
		return fmt.Errorf("idemoutbox: migrate River's tables: %w", err)
	}
	return nil
}
