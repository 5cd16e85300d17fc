package idemoutbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

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
	m, err := migrator(db, dialect)
	if err == nil {
		_, err = m.Migrate(ctx, rivermigrate.DirectionUp, nil)
	}
	if errors.Is(err, ErrMySQL) {
		return err
	}
	if err != nil {
		return fmt.Errorf("idemoutbox: migrate River's tables: %w", err)
	}
	return nil
}

// Validate reports an error unless River's tables in db are at the version
// this module requires: what a server that does not migrate at start
// (versioned migrations, applied by an operator) checks before it
// enqueues.
func Validate(ctx context.Context, db *sql.DB, dialect string) error {
	m, err := migrator(db, dialect)
	if err != nil {
		return err
	}
	res, err := m.Validate(ctx, nil)
	if err != nil {
		return fmt.Errorf("idemoutbox: read River's migrations: %w", err)
	}
	if !res.OK {
		return fmt.Errorf("idemoutbox: River's tables are not migrated to the version this module requires: %s", strings.Join(res.Messages, "; "))
	}
	return nil
}

func migrator(db *sql.DB, dialect string) (*rivermigrate.Migrator[*sql.Tx], error) {
	switch dialect {
	case "sqlite3":
		return rivermigrate.New(riversqlite.New(db), nil)
	case "postgres":
		return rivermigrate.New(riverdatabasesql.New(db), nil)
	case "mysql":
		return nil, ErrMySQL
	}
	return nil, fmt.Errorf("idemoutbox: unsupported dialect %q", dialect)
}
