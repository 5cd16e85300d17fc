package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/goovo/idem/idembackend"
)

// postgresSQL is PostgreSQL's SQL: the standard statements (sql.go) as
// they are, and these. Every batch locks its rows with FOR UPDATE SKIP
// LOCKED, so that several sweepers share the work instead of repeating or
// waiting for it, and selects them by (scope, id): on a table whose key is
// (scope, id) (idempartition.ByTenant) the joins then use the key instead
// of scanning every partition.
var postgresSQL = standardSQL.with(strings.NewReplacer(), statements{
	stmtNow:       `SELECT now()`,
	stmtAbandoned: abandonedSQL(` COLLATE "C"`),
	// One round trip reads the database clock along with the record: a
	// row even when the key is unknown.
	stmtLookup: `SELECT now(), r.idempotency_status, r.idempotency_fingerprint, r.idempotency_response, r.idempotency_attempt,
		r.idempotency_lease_expires_at, r.idempotency_claimed_at, r.idempotency_completed_at, r.idempotency_archived_at
		FROM (SELECT 1) AS one LEFT JOIN {table} AS r ON r.{scope} = $1 AND r.idempotency_key = $2`,
	// One statement: every part sees the rows before the UPDATE, so the
	// archive gets the responses the UPDATE clears.
	stmtArchive: `WITH batch AS (
			SELECT {scope}, {id} FROM {table} WHERE {to_archive} AND idempotency_completed_at < $1 AND ` + archivableOf("$5", "$6", "$4") + `
			ORDER BY idempotency_completed_at LIMIT $2 FOR UPDATE SKIP LOCKED),
		archived AS (` + archiveInsert + `
			SELECT $3, r.{scope}, r.idempotency_key, r.idempotency_status, r.idempotency_fingerprint, r.idempotency_response,
			r.idempotency_attempt, r.idempotency_claimed_at, r.idempotency_completed_at, $4
			FROM {table} AS r JOIN batch ON r.{scope} = batch.{scope} AND r.{id} = batch.{id} ` + archiveOnce + `)
		UPDATE {table} SET idempotency_response = NULL, idempotency_archived_at = $4
		FROM batch WHERE {table}.{scope} = batch.{scope} AND {table}.{id} = batch.{id}`,
	stmtPurgeRecordOnly: `DELETE FROM {table} WHERE ({scope}, {id}) IN (
		SELECT {scope}, {id} FROM {table} WHERE {tombstone} AND idempotency_archived_at < $1
		ORDER BY idempotency_archived_at LIMIT $2 FOR UPDATE SKIP LOCKED)`,
	// One batch: the failed claims are deleted, the succeeded rows forget
	// their key; the statement returns how many it purged.
	stmtPurge: `WITH batch AS (
			SELECT {scope}, {id}, idempotency_status AS status FROM {table} WHERE {tombstone} AND idempotency_archived_at < $1
			ORDER BY idempotency_archived_at LIMIT $2 FOR UPDATE SKIP LOCKED),
		gone AS (DELETE FROM {table} USING batch
			WHERE {table}.{scope} = batch.{scope} AND {table}.{id} = batch.{id} AND batch.status = 'failed' RETURNING 1),
		cleared AS (UPDATE {table} SET ` + forgetKey + ` FROM batch
			WHERE {table}.{scope} = batch.{scope} AND {table}.{id} = batch.{id} AND batch.status <> 'failed' RETURNING 1)
		SELECT (SELECT count(*) FROM gone) + (SELECT count(*) FROM cleared)`,
	stmtPurgeAbandoned: `DELETE FROM {table} WHERE ({scope}, {id}) IN (
		SELECT {scope}, {id} FROM {table} WHERE {pending} AND idempotency_status = 'pending' AND idempotency_lease_expires_at < $1
		ORDER BY idempotency_lease_expires_at LIMIT $2 FOR UPDATE SKIP LOCKED)`,
	stmtArchiveStats: `SELECT count(*), COALESCE(SUM(octet_length(idempotency_response)), 0) FROM {archive}`,

	// The statements of the pipelined path on pgx (pipeline.go).
	// The completion fails (division by zero) when it updates no row: it
	// travels with COMMIT and must stop it by itself.
	stmtCompleteOrFail: `WITH done AS (UPDATE {table} SET idempotency_status = $3, idempotency_response = $4, idempotency_completed_at = $5,
		idempotency_operation = NULL, idempotency_lease_expires_at = $7
		WHERE {scope} = $1 AND idempotency_key = $2 AND idempotency_status = 'pending' AND idempotency_attempt = $6 RETURNING 1)
		SELECT 1 / count(*) FROM done`,
})

// newPostgres is the driver of PostgreSQL: pipelined on pgx, standard
// over database/sql (pipeline.go).
func newPostgres(conn Conn, opts Options) Driver {
	d := &sqlDriver{
		conn:     conn,
		backend:  "PostgreSQL",
		traits:   Traits{ClaimFirst: true, RenewLeases: true},
		classify: classifyPostgres,
		sql:      postgresSQL,
		clock:    &databaseClock{offset: opts.Offset},
		tables:   map[tableKey]statements{},
	}
	d.archive = func(ctx context.Context, tx idembackend.Tx, st statements, b ArchiveBatch) (int, error) {
		return d.affected(ctx, tx, "archive", st[stmtArchive], b.CompletedBefore.UTC(), b.Limit, b.Table.Name, b.Now.UTC(),
			b.FingerprintPrefix, b.CompletedSince.UTC())
	}
	d.purge = func(ctx context.Context, tx idembackend.Tx, st statements, b PurgeBatch) (int, error) {
		return d.count(ctx, tx, "purge", st[stmtPurge], b.ArchivedBefore.UTC(), b.Limit)
	}
	return newPipelined(d)
}

// clockMaxAge is how long a reading of PostgreSQL's clock is reused before
// it is read again; the monotonic clock's drift over it is microseconds.
const clockMaxAge = 30 * time.Second

// databaseClock is the clock of a database server: every lookup reads it,
// and Now reuses the latest reading while it is recent.
type databaseClock struct {
	offset func() time.Duration
	mu     sync.Mutex
	last   Reading
}

func (c *databaseClock) observed(dbNow sql.NullTime) (Reading, error) {
	if !dbNow.Valid {
		return Reading{}, errors.New("no database time returned")
	}
	r := Reading{db: dbNow.Time.UTC(), read: time.Now(), offset: c.offset()}
	c.mu.Lock()
	c.last = r
	c.mu.Unlock()
	return r, nil
}

func (c *databaseClock) now(ctx context.Context, ex idembackend.Executor, query string) (Reading, error) {
	c.mu.Lock()
	r := c.last
	c.mu.Unlock()
	if !r.read.IsZero() && time.Since(r.read) < clockMaxAge {
		r.offset = c.offset()
		return r, nil
	}
	rows, err := ex.QueryContext(ctx, query)
	if err != nil {
		return Reading{}, err
	}
	defer rows.Close()
	var dbNow sql.NullTime
	if rows.Next() {
		if err := rows.Scan(&dbNow); err != nil {
			return Reading{}, err
		}
	}
	if err := rows.Err(); err != nil {
		return Reading{}, err
	}
	return c.observed(dbNow)
}

// classifyPostgres reads pgx's errors by their SQLSTATE code, never by
// their text.
func classifyPostgres(err error) (kind error, detail, hint string) {
	var connect *pgconn.ConnectError
	if errors.As(err, &connect) {
		return ErrUnreachable, connect.Error(), ""
	}
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		switch {
		case pg.Code == "42P01": // undefined_table
			return ErrNoTable, pg.Message, ""
		case pg.Code == "55P03" || pg.Code == "57014": // lock_not_available, query_canceled (statement_timeout)
			return ErrLockTimeout, pg.Message, ""
		case pg.Code == "40001" || pg.Code == "40P01": // serialization_failure, deadlock_detected
			return ErrConflict, pg.Message, ""
		case unstorableCode(pg.Code):
			return ErrUnstorable, pg.Message, ""
		case strings.HasPrefix(pg.Code, "08") || pg.Code == "53300" || strings.HasPrefix(pg.Code, "57P"):
			// connection exceptions, too_many_connections, the server
			// shutting down or starting
			return ErrUnreachable, pg.Message, ""
		}
		return nil, pg.Message, ""
	}
	var netErr net.Error
	if errors.Is(err, driver.ErrBadConn) || errors.As(err, &netErr) {
		return ErrUnreachable, "", ""
	}
	return nil, "", ""
}

// unstorableCode reports the SQLSTATE codes of text PostgreSQL cannot
// store: character_not_in_repertoire (22021: a NUL character, or bytes
// that are not valid in the database's encoding) and
// untranslatable_character (22P05: \u0000 in json, or a character the
// database's encoding lacks).
func unstorableCode(code string) bool { return code == "22021" || code == "22P05" }

// postgresUnstorable reports a PostgreSQL error in err's chain that
// refuses text (unstorableCode).
func postgresUnstorable(err error) bool {
	var pg *pgconn.PgError
	return errors.As(err, &pg) && unstorableCode(pg.Code)
}

// PostgresExplained returns the PostgreSQL text of the statements whose
// cost could grow with the data, for the growth benchmark's EXPLAIN
// (internal/testkit/testapp/growth), by what they do: "lookup" ($1 scope,
// $2 key), "abandoned" (the recoverer's listing: $1 lease ended before,
// $2 limit, $3 claimed before) and "archive" (a sweep's batch: $1
// completed before, $2 limit, $3 record table, $4 now).
func PostgresExplained(t Table, archive string) map[string]string {
	st := postgresSQL.forTable(tableKey{table: t, archive: archive}, Quote)
	return map[string]string{"lookup": st[stmtLookup], "abandoned": st[stmtAbandoned], "archive": st[stmtArchive]}
}
