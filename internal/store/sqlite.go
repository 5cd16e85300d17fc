package store

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/goovo/idem/idembackend"
)

// sqlitePlaceholders rewrites the standard statements' placeholders into
// SQLite's numbered ones: SQLite reads $1 as a named parameter, numbered
// by its first appearance rather than by its digits.
var sqlitePlaceholders = strings.NewReplacer("$1", "?1", "$2", "?2", "$3", "?3", "$4", "?4", "$5", "?5", "$6", "?6", "$7", "?7")

// sqliteSQL is SQLite's SQL: the standard statements (sql.go) and these.
// SQLite has one writer, so a batch needs no row locks: its transaction
// (immediate, see idemdb.SQLiteDSN) holds the database's write lock, and
// a batch of two statements selects the same rows in both.
var sqliteSQL = standardSQL.with(sqlitePlaceholders, statements{
	// SQLite runs in this process: its clock is this machine's, and the
	// lookup reads none (NULL in its place).
	stmtLookup: `SELECT NULL, ` + lookupColumns + ` FROM {table} WHERE {scope} = ?1 AND idempotency_key = ?2`,
	stmtArchiveCopy: archiveInsert + `
		SELECT ?3, r.{scope}, r.idempotency_key, r.idempotency_status, r.idempotency_fingerprint, r.idempotency_response,
		r.idempotency_attempt, r.idempotency_claimed_at, r.idempotency_completed_at, ?4
		FROM {table} AS r WHERE r.{id} IN (` + sqliteArchivable + `) ` + archiveOnce,
	stmtArchiveClear:    `UPDATE {table} SET idempotency_response = NULL, idempotency_archived_at = ?4 WHERE {id} IN (` + sqliteArchivable + `)`,
	stmtPurgeRecordOnly: `DELETE FROM {table} WHERE {id} IN (` + sqlitePurgeable + `)`,
	// A batch of a business table is read first, and both statements take
	// its ids (?1, a JSON array): each selecting its own batch would let
	// the second pick failed claims the first never saw, and keep them as
	// rows without a key.
	stmtPurgeSelect: sqlitePurgeable,
	stmtPurgeFailed: `DELETE FROM {table} WHERE {id} IN (SELECT value FROM json_each(?1)) AND idempotency_status = 'failed'`,
	stmtPurgeClear:  `UPDATE {table} SET ` + forgetKey + ` WHERE {id} IN (SELECT value FROM json_each(?1))`,
	stmtPurgeAbandoned: `DELETE FROM {table} WHERE {id} IN (
		SELECT {id} FROM {table} WHERE {pending} AND idempotency_status = 'pending' AND idempotency_lease_expires_at < ?1
		ORDER BY idempotency_lease_expires_at LIMIT ?2)`,
	stmtArchiveStats: `SELECT count(*), COALESCE(SUM(length(idempotency_response)), 0) FROM {archive}`,
})

// The batches' selections: up to ?2 rows past the cutoff ?1.
var (
	sqliteArchivable = `SELECT {id} FROM {table} WHERE {to_archive} AND idempotency_completed_at < ?1 AND ` + archivableOf("?5", "?6", "?4") + `
		ORDER BY idempotency_completed_at LIMIT ?2`
	sqlitePurgeable = `SELECT {id} FROM {table} WHERE {tombstone} AND idempotency_archived_at < ?1
		ORDER BY idempotency_archived_at LIMIT ?2`
)

// newSQLite is the driver of SQLite (modernc.org/sqlite) over database/sql.
func newSQLite(conn Conn, opts Options) Driver {
	d := &sqlDriver{
		conn:     conn,
		backend:  "SQLite",
		classify: classifySQLite,
		sql:      sqliteSQL,
		clock:    localClock{offset: opts.Offset},
		tables:   map[tableKey]statements{},
	}
	d.archive = func(ctx context.Context, tx idembackend.Tx, st statements, b ArchiveBatch) (int, error) {
		args := []any{b.CompletedBefore.UTC(), b.Limit, b.Table.Name, b.Now.UTC(), b.FingerprintPrefix, b.CompletedSince.UTC()}
		if _, err := d.affected(ctx, tx, "archive", st[stmtArchiveCopy], args...); err != nil {
			return 0, err
		}
		return d.affected(ctx, tx, "archive", st[stmtArchiveClear], args...)
	}
	d.purge = func(ctx context.Context, tx idembackend.Tx, st statements, b PurgeBatch) (int, error) {
		ids, err := d.ids(ctx, tx, st[stmtPurgeSelect], b.ArchivedBefore.UTC(), b.Limit)
		if err != nil {
			return 0, err
		}
		deleted, err := d.affected(ctx, tx, "purge", st[stmtPurgeFailed], ids)
		if err != nil {
			return 0, err
		}
		cleared, err := d.affected(ctx, tx, "purge", st[stmtPurgeClear], ids)
		return deleted + cleared, err
	}
	return d
}

// SQLite's result codes (the low byte of an extended code).
const (
	sqliteError    = 1
	sqliteBusy     = 5
	sqliteLocked   = 6
	sqliteCantOpen = 14
)

// classifySQLite reads SQLite's errors by their result code.
func classifySQLite(err error) (kind error, detail, hint string) {
	var lite interface{ Code() int } // modernc.org/sqlite's *Error
	if !errors.As(err, &lite) {
		return nil, "", ""
	}
	switch lite.Code() & 0xff {
	case sqliteBusy, sqliteLocked:
		return ErrBusy, "", ""
	case sqliteCantOpen:
		return ErrUnreachable, "", "does its directory exist, and may this user read and write it?"
	case sqliteError:
		if strings.Contains(err.Error(), "no such table") {
			return ErrNoTable, "", ""
		}
	}
	return nil, "", ""
}

// ids reads a batch's ids as a JSON array, for json_each.
func (d *sqlDriver) ids(ctx context.Context, ex idembackend.Executor, q string, args ...any) (string, error) {
	rows, err := d.query(ctx, ex, q, args...)
	if err != nil {
		return "", d.err("purge", err)
	}
	defer rows.Close()
	ids := []any{}
	for rows.Next() {
		var id any
		if err := rows.Scan(&id); err != nil {
			return "", d.err("purge", err)
		}
		if b, ok := id.([]byte); ok {
			id = string(b) // a text id, not bytes to encode
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return "", d.err("purge", err)
	}
	b, err := json.Marshal(ids)
	return string(b), err
}
