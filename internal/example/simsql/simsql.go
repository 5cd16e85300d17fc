// Package simsql is what the example's simulated services (the payment
// provider, the mailer) share to keep their ledgers in PostgreSQL or
// SQLite with one text of each statement.
package simsql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Now is the current time as the ledger stores it: a timestamp on
// PostgreSQL, RFC 3339 text on SQLite, whose TEXT column sorts it.
func Now(postgres bool) any {
	if postgres {
		return time.Now().UTC()
	}
	return time.Now().UTC().Format(time.RFC3339Nano)
}

// TimeColumn is the column type of the times Now writes: TIMESTAMPTZ on
// PostgreSQL, TEXT on SQLite.
func TimeColumn(postgres bool) string {
	if postgres {
		return "TIMESTAMPTZ"
	}
	return "TEXT"
}

// Rebind turns q's $1…$9 placeholders into SQLite's ? when postgres is
// false.
func Rebind(postgres bool, q string) string {
	if postgres {
		return q
	}
	for i := 9; i >= 1; i-- {
		q = strings.ReplaceAll(q, fmt.Sprintf("$%d", i), "?")
	}
	return q
}

// ErrNotMigrated is returned by the simulated services' constructors when
// their table is missing or lacks a column: they never create it
// themselves, so that a server started without its automatic migration
// (-migrate=false) changes no schema. Their Migrate functions, or the
// versioned migrations, create it.
var ErrNotMigrated = errors.New("table missing or out of date")

// Check returns ErrNotMigrated, with the database's own error, unless
// table exists in db with every column named.
func Check(ctx context.Context, db *sql.DB, table string, columns ...string) error {
	rows, err := db.QueryContext(ctx, "SELECT "+strings.Join(columns, ", ")+" FROM "+table+" WHERE 1 = 0")
	if err != nil {
		return fmt.Errorf("%s: %w (%v)", table, ErrNotMigrated, err)
	}
	return errors.Join(rows.Err(), rows.Close())
}
