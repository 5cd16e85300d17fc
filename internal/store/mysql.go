package store

import (
	"context"
	"database/sql/driver"
	"errors"
	"net"
	"strconv"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/goovo/idem/idembackend"
)

// mysqlSQL is the SQL of MySQL and MariaDB (ent's "mysql" dialect): the
// standard statements (sql.go), with CAST(… AS CHAR) for PostgreSQL's
// CAST(… AS TEXT), and these. The standard statements' numbered
// placeholders ($1) are bound at each call (bindNumbered): MySQL's are
// positional (?).
//
// What differs from PostgreSQL:
//   - the clock is UTC_TIMESTAMP(6), in microseconds, and every time is
//     written and compared in UTC (the mixin's DATETIME(6) columns hold
//     no time zone);
//   - MySQL cannot take LIMIT in an IN subquery, nor change a table it
//     selects from in a subquery, so a batch is two steps in one
//     transaction: its ids, locked with FOR UPDATE SKIP LOCKED (MariaDB
//     10.6+, MySQL 8.0+), then the statements on those ids (mysqlBatch);
//   - there are no partial indexes: the mixin's three indexes on MySQL
//     are plain ones on the same columns, which the batches' predicates
//     still narrow;
//   - no statement uses RETURNING (MariaDB 10.5+ has INSERT … RETURNING,
//     MySQL 8 has none): the claim is a plain INSERT whose duplicate-key
//     error on the claim's index means the key is taken
//     (idembackend.IsMySQLDuplicateOf), and its id is LAST_INSERT_ID.
var mysqlSQL = standardSQL.with(strings.NewReplacer("AS TEXT)", "AS CHAR)"), statements{
	stmtNow: `SELECT UTC_TIMESTAMP(6)`,
	// One round trip reads the database clock along with the record: a
	// row even when the key is unknown.
	stmtLookup: `SELECT UTC_TIMESTAMP(6), r.idempotency_status, r.idempotency_fingerprint, r.idempotency_response, r.idempotency_attempt,
		r.idempotency_lease_expires_at, r.idempotency_claimed_at, r.idempotency_completed_at, r.idempotency_archived_at
		FROM (SELECT 1) AS one LEFT JOIN {table} AS r ON r.{scope} = $1 AND r.idempotency_key = $2`,
	stmtArchiveSelect: strings.ReplaceAll(`SELECT {id} FROM {table} WHERE {to_archive} AND idempotency_completed_at < $1 AND `+archivableOf("$5", "$6", "$4")+`
		ORDER BY idempotency_completed_at LIMIT $2 FOR UPDATE SKIP LOCKED`, "AS TEXT)", "AS CHAR)"),
	// $3 the record table, $4 now; {ids} the batch's ids.
	stmtArchiveCopy: archiveInsert + `
		SELECT $3, r.{scope}, r.idempotency_key, r.idempotency_status, r.idempotency_fingerprint, r.idempotency_response,
		r.idempotency_attempt, r.idempotency_claimed_at, r.idempotency_completed_at, $4
		FROM {table} AS r WHERE r.{id} IN ({ids})
		ON DUPLICATE KEY UPDATE {archive}.record_table = {archive}.record_table`,
	stmtArchiveClear: `UPDATE {table} SET idempotency_response = NULL, idempotency_archived_at = $4 WHERE {id} IN ({ids})`,
	stmtPurgeSelect: `SELECT {id} FROM {table} WHERE {tombstone} AND idempotency_archived_at < $1
		ORDER BY idempotency_archived_at LIMIT $2 FOR UPDATE SKIP LOCKED`,
	stmtPurgeFailed: `DELETE FROM {table} WHERE {id} IN ({ids}) AND idempotency_status = 'failed'`,
	stmtPurgeClear:  `UPDATE {table} SET ` + forgetKey + ` WHERE {id} IN ({ids})`,
	// MySQL's own forms of a batch of one statement: DELETE with ORDER BY
	// and LIMIT (no SKIP LOCKED: a second sweeper waits for the first's
	// rows instead of skipping them).
	stmtPurgeRecordOnly: `DELETE FROM {table} WHERE {tombstone} AND idempotency_archived_at < $1
		ORDER BY idempotency_archived_at LIMIT $2`,
	stmtPurgeAbandoned: `DELETE FROM {table} WHERE {pending} AND idempotency_status = 'pending' AND idempotency_lease_expires_at < $1
		ORDER BY idempotency_lease_expires_at LIMIT $2`,
	stmtArchiveStats: `SELECT count(*), COALESCE(SUM(LENGTH(idempotency_response)), 0) FROM {archive}`,
})

// newMySQL is the driver of MySQL and MariaDB (go-sql-driver/mysql) over
// database/sql. The connection must report the rows an UPDATE matched
// (clientFoundRows=true, which idemdb.MySQLDSN sets), parse times
// (parseTime=true) and read them as UTC (loc=UTC, the default).
func newMySQL(conn Conn, opts Options) Driver {
	d := &sqlDriver{
		conn:     conn,
		backend:  "MySQL",
		traits:   Traits{ClaimFirst: true, RenewLeases: true},
		classify: classifyMySQL,
		sql:      mysqlSQL,
		clock:    &databaseClock{offset: opts.Offset},
		tables:   map[tableKey]statements{},
		quote:    mysqlQuote,
		bind:     bindNumbered,
		retries:  mysqlDeadlockRetries,
	}
	d.archive = func(ctx context.Context, tx idembackend.Tx, st statements, b ArchiveBatch) (int, error) {
		ids, err := d.batchIDs(ctx, tx, "archive", st[stmtArchiveSelect], b.CompletedBefore.UTC(), b.Limit, nil, b.Now.UTC(), b.FingerprintPrefix, b.CompletedSince.UTC())
		if err != nil || len(ids) == 0 {
			return 0, err
		}
		copyArgs := []any{nil, nil, b.Table.Name, b.Now.UTC()}
		if _, err := d.affected(ctx, tx, "archive", withIDs(st[stmtArchiveCopy], len(copyArgs), len(ids)), append(copyArgs, ids...)...); err != nil {
			return 0, err
		}
		return d.affected(ctx, tx, "archive", withIDs(st[stmtArchiveClear], len(copyArgs), len(ids)), append(copyArgs, ids...)...)
	}
	d.purge = func(ctx context.Context, tx idembackend.Tx, st statements, b PurgeBatch) (int, error) {
		ids, err := d.batchIDs(ctx, tx, "purge", st[stmtPurgeSelect], b.ArchivedBefore.UTC(), b.Limit)
		if err != nil || len(ids) == 0 {
			return 0, err
		}
		deleted, err := d.affected(ctx, tx, "purge", withIDs(st[stmtPurgeFailed], 0, len(ids)), ids...)
		if err != nil {
			return 0, err
		}
		cleared, err := d.affected(ctx, tx, "purge", withIDs(st[stmtPurgeClear], 0, len(ids)), ids...)
		return deleted + cleared, err
	}
	return d
}

// mysqlDeadlockRetries is how often a statement or batch that InnoDB
// rolled back in a deadlock runs again before the error reaches its
// caller. InnoDB's row and gap locks make deadlocks between concurrent
// writers of one table a normal event, to be retried (MySQL's manual,
// "How to Minimize and Handle Deadlocks").
const mysqlDeadlockRetries = 5

// mysqlQuote quotes an identifier with backquotes, as MySQL does without
// ANSI_QUOTES.
func mysqlQuote(ident string) string { return "`" + strings.ReplaceAll(ident, "`", "``") + "`" }

// withIDs replaces {ids} in q with the placeholders $after+1 … $after+n.
func withIDs(q string, after, n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("$" + strconv.Itoa(after+i+1))
	}
	return strings.Replace(q, "{ids}", b.String(), 1)
}

// batchIDs reads the ids of a batch, locked by its transaction.
func (d *sqlDriver) batchIDs(ctx context.Context, ex idembackend.Executor, op, q string, args ...any) ([]any, error) {
	rows, err := d.query(ctx, ex, q, args...)
	if err != nil {
		return nil, d.err(op, err)
	}
	defer rows.Close()
	var ids []any
	for rows.Next() {
		var id any
		if err := rows.Scan(&id); err != nil {
			return nil, d.err(op, err)
		}
		ids = append(ids, id)
	}
	return ids, d.err(op, rows.Err())
}

// bindNumbered rewrites the numbered placeholders of q ($1, $2, …) into
// positional ones (?), with the arguments in the order of their markers:
// a marker used twice takes its argument twice.
func bindNumbered(q string, args []any) (string, []any) {
	if !strings.Contains(q, "$") {
		return q, args
	}
	var b strings.Builder
	b.Grow(len(q))
	bound := make([]any, 0, len(args))
	for i := 0; i < len(q); i++ {
		if q[i] != '$' || i+1 >= len(q) || q[i+1] < '0' || q[i+1] > '9' {
			b.WriteByte(q[i])
			continue
		}
		j := i + 1
		for j < len(q) && q[j] >= '0' && q[j] <= '9' {
			j++
		}
		n, _ := strconv.Atoi(q[i+1 : j])
		var v any
		if n >= 1 && n <= len(args) {
			v = args[n-1]
		}
		bound = append(bound, v)
		b.WriteByte('?')
		i = j - 1
	}
	return b.String(), bound
}

// MySQL's and MariaDB's error numbers the store tells apart.
const (
	mysqlLockWaitTimeout  = 1205 // ER_LOCK_WAIT_TIMEOUT
	mysqlDeadlock         = 1213 // ER_LOCK_DEADLOCK
	mysqlAutoIncRead      = 1467 // ER_AUTOINC_READ_FAILED: see classifyMySQL
	mysqlNoSuchTable      = 1146 // ER_NO_SUCH_TABLE
	mysqlWrongString      = 1366 // ER_TRUNCATED_WRONG_VALUE_FOR_FIELD: "Incorrect string value"
	mysqlInvalidCharacter = 1300 // ER_INVALID_CHARACTER_STRING
	mysqlStatementTimeout = 1969 // MariaDB's max_statement_time
	mysqlQueryTimeout     = 3024 // MySQL's max_execution_time
	mysqlTooManyConns     = 1040 // ER_CON_COUNT_ERROR
	mysqlShutdown         = 1053 // ER_SERVER_SHUTDOWN
	mysqlConnKilled       = 1927 // MariaDB's ER_CONNECTION_KILLED
	mysqlAccessDenied     = 1045 // ER_ACCESS_DENIED_ERROR
	mysqlUnknownDatabase  = 1049 // ER_BAD_DB_ERROR
)

// classifyMySQL reads go-sql-driver's errors by their number, never by
// their text.
func classifyMySQL(err error) (kind error, detail, hint string) {
	var my *mysql.MySQLError
	if errors.As(err, &my) {
		switch my.Number {
		case mysqlNoSuchTable:
			return ErrNoTable, my.Message, ""
		case mysqlLockWaitTimeout, mysqlStatementTimeout, mysqlQueryTimeout:
			return ErrLockTimeout, my.Message, ""
		case mysqlDeadlock, mysqlAutoIncRead:
			// An INSERT … SELECT (the archive's copy) takes the table's
			// AUTO-INC lock (innodb_autoinc_lock_mode 1, MariaDB's
			// default); MariaDB reports a deadlock over that lock as
			// 1467, "Failed to read auto-increment value", measured here
			// with four concurrent sweepers.
			return ErrConflict, my.Message, ""
		case mysqlWrongString, mysqlInvalidCharacter:
			return ErrUnstorable, my.Message, ""
		case mysqlTooManyConns, mysqlShutdown, mysqlConnKilled:
			return ErrUnreachable, my.Message, ""
		case mysqlAccessDenied, mysqlUnknownDatabase:
			return ErrUnreachable, my.Message, "do the URL's user, password and database exist on the server?"
		}
		return nil, my.Message, ""
	}
	var netErr net.Error
	if errors.Is(err, driver.ErrBadConn) || errors.Is(err, mysql.ErrInvalidConn) || errors.As(err, &netErr) {
		return ErrUnreachable, "", ""
	}
	return nil, "", ""
}

// mysqlUnstorable reports a MySQL error in err's chain that refuses text:
// bytes that are not valid in the column's character set (utf8mb4).
func mysqlUnstorable(err error) bool {
	var my *mysql.MySQLError
	return errors.As(err, &my) && (my.Number == mysqlWrongString || my.Number == mysqlInvalidCharacter)
}
