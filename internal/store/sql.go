package store

import (
	"strings"

	"github.com/goovo/idem/internal/record"
)

// stmt names a statement.
type stmt int

// The statements. A backend's set is the standard ones below, in its own
// placeholder style, and those its file adds or replaces.
const (
	stmtPing stmt = iota
	stmtNow
	stmtLookup
	stmtTakeOver
	stmtSetLease
	stmtComplete
	stmtSavepoint
	stmtRollbackToSavepoint
	stmtCountArchivable
	stmtPromised
	stmtArchive       // PostgreSQL: one statement
	stmtArchiveSelect // MySQL: the batch's ids, then …
	stmtArchiveCopy   // SQLite, MySQL: the copy into the archive, then …
	stmtArchiveClear  // … the tombstones, in one transaction
	stmtCountPurgeable
	stmtPurgeRecordOnly
	stmtPurge       // PostgreSQL: one statement that returns its count
	stmtPurgeSelect // SQLite, MySQL: the batch, then …
	stmtPurgeFailed // … its failed claims, then …
	stmtPurgeClear  // … its succeeded rows' keys
	stmtCountAbandoned
	stmtPurgeAbandoned
	stmtStats
	stmtArchiveStats
	stmtStuck
	stmtAbandoned
	stmtRequeue
	stmtFailed
	stmtCompleted
	stmtFind
	stmtFindArchived
	stmtCompleteOrFail // PostgreSQL on pgx: the completion that travels with COMMIT
)

// statements are a backend's SQL, by name.
type statements map[stmt]string

// standardSQL are the statements both backends run as they are, written
// with PostgreSQL's numbered placeholders ($1), which the SQLite driver
// rewrites into its own (?1). Numbered placeholders let a statement take
// its arguments in one order whatever the order of its markers.
//
// Markers in braces are substituted once per table (see tableSQL):
// {table}, {scope} and {id} are the record table, its scope column and its
// primary key, {archive} the archive table, and {to_archive}, {tombstone}
// and {pending} the predicates of the mixin's partial indexes (package
// record), through which the batches select their rows.
var standardSQL = statements{
	stmtPing: `SELECT 1`,
	// A takeover is one conditional statement: it succeeds for exactly one
	// caller, and only while the lease it saw has run out.
	stmtTakeOver: `UPDATE {table} SET idempotency_attempt = idempotency_attempt + 1, idempotency_lease_expires_at = $3
		WHERE {scope} = $1 AND idempotency_key = $2 AND idempotency_status = 'pending' AND idempotency_attempt = $4
		AND idempotency_lease_expires_at <= $5`,
	// Completion and lease changes (release, renewal) are fenced by the
	// attempt: a worker that lost its claim changes nothing.
	// A finished claim will not run again: it forgets its operation.
	// Its lease column becomes the result's expiry (Completion.ExpiresAt).
	stmtComplete: `UPDATE {table} SET idempotency_status = $3, idempotency_response = $4, idempotency_completed_at = $5,
		idempotency_operation = NULL, idempotency_lease_expires_at = $7
		WHERE {scope} = $1 AND idempotency_key = $2 AND idempotency_status = 'pending' AND idempotency_attempt = $6`,
	stmtSetLease: `UPDATE {table} SET idempotency_lease_expires_at = $3
		WHERE {scope} = $1 AND idempotency_key = $2 AND idempotency_status = 'pending' AND idempotency_attempt = $4`,
	// The savepoint separates an atomic-mode claim from the resolver's
	// writes, so that a final error can roll the writes back and still
	// store the failure on the claim's row.
	stmtSavepoint:           `SAVEPOINT idem_resolver`,
	stmtRollbackToSavepoint: `ROLLBACK TO SAVEPOINT idem_resolver`,

	stmtCountArchivable: `SELECT count(*) FROM {table} WHERE {to_archive} AND idempotency_completed_at < $1 AND ` + archivableOf("$2", "$3", "$4"),
	// The records a sweeper's cutoff would archive whose answers promised
	// a later expiry: kept, and reported (Promised).
	stmtPromised: `SELECT count(*), MAX(idempotency_lease_expires_at) FROM {table}
		WHERE {to_archive} AND idempotency_completed_at < $1 AND idempotency_lease_expires_at > $2`,
	stmtCountPurgeable: `SELECT count(*) FROM {table} WHERE {tombstone} AND idempotency_archived_at < $1`,
	stmtCountAbandoned: `SELECT count(*) FROM {table}
		WHERE {pending} AND idempotency_status = 'pending' AND idempotency_lease_expires_at < $1`,

	// Stats scans the rows that have a key: an operator's command.
	stmtStats: `SELECT
		COALESCE(SUM(CASE WHEN idempotency_status = 'pending' THEN 1 ELSE 0 END), 0),
		COALESCE(SUM(CASE WHEN idempotency_status = 'succeeded' AND idempotency_archived_at IS NULL THEN 1 ELSE 0 END), 0),
		COALESCE(SUM(CASE WHEN idempotency_status = 'failed' AND idempotency_archived_at IS NULL THEN 1 ELSE 0 END), 0),
		COALESCE(SUM(CASE WHEN idempotency_archived_at IS NOT NULL THEN 1 ELSE 0 END), 0),
		MIN(CASE WHEN idempotency_status = 'pending' THEN idempotency_claimed_at END)
		FROM {table} WHERE idempotency_key IS NOT NULL`,
	// The operator's lists read rowColumns after the scope.
	stmtStuck: `SELECT {scope}, ` + rowColumns + ` FROM {table}
		WHERE {pending} AND idempotency_status = 'pending' AND idempotency_lease_expires_at < $1
		ORDER BY idempotency_lease_expires_at LIMIT $2`,
	// The recoverer's turn (AbandonedQuery): abandonedSQL, without a
	// collation on SQLite.
	stmtAbandoned: abandonedSQL(""),
	// Fenced like a takeover: the attempt that was listed, its lease still
	// ended before the cutoff it was listed with.
	stmtRequeue: `UPDATE {table} SET idempotency_lease_expires_at = $3
		WHERE {scope} = $1 AND idempotency_key = $2 AND idempotency_status = 'pending' AND idempotency_attempt = $4
		AND idempotency_lease_expires_at < $5`,
	stmtFailed: `SELECT {scope}, ` + rowColumns + ` FROM {table}
		WHERE idempotency_status = 'failed' AND idempotency_archived_at IS NULL AND idempotency_completed_at IS NOT NULL
		AND ($2 = '' OR {scope} = $2) AND idempotency_completed_at >= $3 AND idempotency_completed_at < $4
		ORDER BY idempotency_completed_at DESC LIMIT $1`,
	// Through the partial index the archive batches use.
	stmtCompleted: `SELECT {scope}, ` + rowColumns + ` FROM {table}
		WHERE {to_archive} AND idempotency_completed_at >= $1
		ORDER BY idempotency_completed_at DESC LIMIT $2`,
	stmtFind: `SELECT {scope}, ` + rowColumns + ` FROM {table} WHERE {scope} = $1 AND idempotency_key = $2`,
	// The archive has no lease: NULL in its place.
	stmtFindArchived: `SELECT tenant_id, idempotency_key, idempotency_status, idempotency_fingerprint, idempotency_attempt,
		idempotency_response, NULL, idempotency_claimed_at, idempotency_completed_at, idempotency_archived_at, (1 = 0)
		FROM {archive} WHERE record_table = $3 AND tenant_id = $1 AND idempotency_key = $2 ORDER BY idempotency_claimed_at`,
}

// abandonedSQL is the recoverer's turn (AbandonedQuery): each claim's place
// in its tenant's queue, then the first places of every tenant before the
// second ones. The window reads the keys of every claim past the cutoff,
// through the pending index; only the chosen rows are read whole,
// operation included, through the unique index. bytewise follows each
// text sort key: the order of tenants and keys only breaks ties, so any
// collation lists the same turns, and on PostgreSQL a byte-wise one
// (COLLATE "C") sorts a backlog of 9,000 claims in a few ms where the
// database's locale (strcoll, even C.UTF-8) took 90 (BENCHMARKS.md,
// growth).
func abandonedSQL(bytewise string) string {
	return `WITH listed AS (
			SELECT {scope} AS t, idempotency_key AS k, idempotency_lease_expires_at AS l,
				row_number() OVER (PARTITION BY {scope}` + bytewise + ` ORDER BY idempotency_lease_expires_at, idempotency_key` + bytewise + `) AS turn
			FROM {table}
			WHERE {pending} AND idempotency_status = 'pending' AND idempotency_lease_expires_at < $1
				AND (idempotency_operation IS NOT NULL OR idempotency_claimed_at < $3)
		), chosen AS (
			SELECT t, k, l, turn FROM listed ORDER BY turn, l, t` + bytewise + `, k` + bytewise + ` LIMIT $2
		)
		SELECT r.{scope}, r.idempotency_key, r.idempotency_fingerprint, r.idempotency_attempt, r.idempotency_lease_expires_at,
			r.idempotency_claimed_at, r.idempotency_operation
		FROM chosen JOIN {table} AS r ON r.{scope} = chosen.t AND r.idempotency_key = chosen.k
		ORDER BY chosen.turn, chosen.l, chosen.t` + bytewise + `, chosen.k` + bytewise
}

// archivableOf narrows an archive batch to the records completed since the
// time in the placeholder since whose fingerprint begins with the text in
// prefix (ArchiveBatch): one mutation's records in a band, or, with the
// zero time and an empty prefix, every record; and of those, the ones
// whose promised expiry (the lease column of a finished record,
// Completion.ExpiresAt) is not after now, whatever the sweeper's cutoff. One form for both, without
// an OR, so that a prepared statement's generic plan still bounds its scan
// of the partial index on the completion time to [since, cutoff); the
// prefix filters the rows read (no index holds the fingerprint).
func archivableOf(prefix, since, now string) string {
	return `idempotency_completed_at >= ` + since +
		` AND substr(COALESCE(idempotency_fingerprint, ''), 1, length(CAST(` + prefix + ` AS TEXT))) = CAST(` + prefix + ` AS TEXT)` +
		` AND (idempotency_lease_expires_at IS NULL OR idempotency_lease_expires_at <= ` + now + `)`
}

// lookupColumns are the record's columns as Lookup scans them, after the
// database time.
const lookupColumns = `idempotency_status, idempotency_fingerprint, idempotency_response, idempotency_attempt,
	idempotency_lease_expires_at, idempotency_claimed_at, idempotency_completed_at, idempotency_archived_at`

// rowColumns are the columns of an operator's Row, after the scope.
const rowColumns = `idempotency_key, idempotency_status, idempotency_fingerprint, idempotency_attempt, idempotency_response,
	idempotency_lease_expires_at, idempotency_claimed_at, idempotency_completed_at, idempotency_archived_at,
	(idempotency_operation IS NOT NULL)`

// archiveInsert copies a record into the archive; both backends follow it
// with a SELECT of the rows, then ON CONFLICT … DO NOTHING (archiveOnce).
const archiveInsert = `INSERT INTO {archive} (record_table, tenant_id, idempotency_key, idempotency_status, idempotency_fingerprint,
	idempotency_response, idempotency_attempt, idempotency_claimed_at, idempotency_completed_at, idempotency_archived_at)`

// archiveOnce makes archiving a record twice a no-op (the archive's unique
// index).
const archiveOnce = `ON CONFLICT (record_table, tenant_id, idempotency_key, idempotency_claimed_at) DO NOTHING`

// forgetKey is what purging a tombstone of a business row leaves: the row,
// without its idempotency columns, like a row created without a key.
const forgetKey = `idempotency_key = NULL, idempotency_status = NULL, idempotency_fingerprint = '', idempotency_response = NULL,
	idempotency_attempt = 0, idempotency_lease_expires_at = NULL, idempotency_claimed_at = NULL,
	idempotency_completed_at = NULL, idempotency_archived_at = NULL, idempotency_operation = NULL`

// with returns the standard statements, rewritten by placeholders, with
// own added or replacing them.
func (s statements) with(placeholders *strings.Replacer, own statements) statements {
	out := statements{}
	for k, q := range s {
		out[k] = placeholders.Replace(q)
	}
	for k, q := range own {
		out[k] = q
	}
	return out
}

// tableKey is what a statement's markers are substituted with.
type tableKey struct {
	table   Table
	archive string
}

// forTable returns the statements with their markers substituted, the
// identifiers quoted by quote.
func (s statements) forTable(k tableKey, quote func(string) string) statements {
	r := strings.NewReplacer(
		"{table}", quote(k.table.Name),
		"{scope}", quote(k.table.Scope),
		"{id}", quote(k.table.ID),
		"{archive}", quote(k.archive),
		"{to_archive}", record.ToArchive,
		"{tombstone}", record.Tombstone,
		"{pending}", record.Pending,
	)
	out := make(statements, len(s))
	for name, q := range s {
		out[name] = r.Replace(q)
	}
	return out
}
