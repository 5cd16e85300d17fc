// Package simsql is what the example's simulated services (the payment
// provider, the mailer) share to keep their ledgers in PostgreSQL or
// SQLite with one text of each statement.
package simsql

import (
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
