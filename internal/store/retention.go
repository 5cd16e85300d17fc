package store

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// The statements of retention: archiving expired responses, purging old
// tombstones, and what operators read (statistics, stuck and failed
// records, one key). Each batch statement selects its rows through one of
// the mixin's partial indexes, so that its cost follows the rows it moves,
// not the size of the table, and on PostgreSQL it locks them with SKIP
// LOCKED, so that several sweepers share the work instead of repeating or
// waiting for it.

// archiveColumns are the columns an archived record keeps, in the order of
// the archive's INSERT.
const archiveColumns = "record_table, tenant_id, idempotency_key, idempotency_status, idempotency_fingerprint, " +
	"idempotency_response, idempotency_attempt, idempotency_claimed_at, idempotency_completed_at, idempotency_archived_at"

// expiredPredicate selects finished records that still hold their response
// (the partial index on completed_at) and completed before $1 / ?1.
func (s *Store) expiredPredicate() string {
	return "idempotency_completed_at IS NOT NULL AND idempotency_archived_at IS NULL AND idempotency_completed_at < " + s.placeholders()(1)
}

// ArchiveBatch moves the responses of up to limit records of t that
// completed before cutoff into the archive table and leaves tombstones
// (scope, key, fingerprint, status, times) behind. ex must be a transaction:
// a record is in the archive or in t, never both and never neither. It
// returns how many records it moved.
func (s *Store) ArchiveBatch(ctx context.Context, ex Executor, t Table, archive string, cutoff, now time.Time, limit int) (int, error) {
	table, id, scope := quote(t.Name), quote(t.ID), quote(t.Scope)
	p := s.placeholders()
	selected := fmt.Sprintf("SELECT %s FROM %s WHERE %s ORDER BY idempotency_completed_at LIMIT %s", id, table, s.expiredPredicate(), p(2))
	copyRows := func(from string) string {
		return fmt.Sprintf("INSERT INTO %s (%s) SELECT %s, r.%s, r.idempotency_key, r.idempotency_status, r.idempotency_fingerprint, "+
			"r.idempotency_response, r.idempotency_attempt, r.idempotency_claimed_at, r.idempotency_completed_at, %s FROM %s "+
			"ON CONFLICT (record_table, tenant_id, idempotency_key, idempotency_claimed_at) DO NOTHING",
			quote(archive), archiveColumns, p(3), scope, p(4), from)
	}
	args := []any{cutoff.UTC(), limit, t.Name, now.UTC()}
	if s.dialect == Postgres {
		// One statement: every part sees the rows before the UPDATE, so the
		// archive gets the responses the UPDATE clears.
		// The batch carries the scope as well as the id: on a table whose
		// key is (scope, id) (idemdb.PartitionByTenant) the joins then use
		// the key instead of scanning every partition.
		batch := fmt.Sprintf("SELECT %s, %s FROM %s WHERE %s ORDER BY idempotency_completed_at LIMIT %s", scope, id, table, s.expiredPredicate(), p(2))
		q := fmt.Sprintf("WITH batch AS (%s FOR UPDATE SKIP LOCKED), archived AS (%s) "+
			"UPDATE %s SET idempotency_response = NULL, idempotency_archived_at = $4 FROM batch WHERE %s.%s = batch.%s AND %s.%s = batch.%s",
			batch, copyRows(table+" AS r JOIN batch ON r."+scope+" = batch."+scope+" AND r."+id+" = batch."+id), table, table, scope, scope, table, id, id)
		return s.affected(ctx, ex, "archive", q, args...)
	}
	// SQLite: two statements in the caller's (immediate, exclusive)
	// transaction select the same rows.
	if _, err := ex.ExecContext(ctx, copyRows(table+" AS r WHERE r."+id+" IN ("+selected+")"), args...); err != nil {
		return 0, &Error{Op: "archive", Err: err}
	}
	q := fmt.Sprintf("UPDATE %s SET idempotency_response = NULL, idempotency_archived_at = ?4 WHERE %s IN (%s)", table, id, selected)
	return s.affected(ctx, ex, "archive", q, args...)
}

// PurgeBatch ends up to limit tombstones of t archived before cutoff: the key
// is forgotten. Rows that are nothing but records (recordOnly), and failed
// claims, are deleted; a succeeded business row stays, without its
// idempotency columns, like a row created without a key.
func (s *Store) PurgeBatch(ctx context.Context, ex Executor, t Table, recordOnly bool, cutoff time.Time, limit int) (int, error) {
	table, id, scope := quote(t.Name), quote(t.ID), quote(t.Scope)
	p := s.placeholders()
	selected := fmt.Sprintf("SELECT %s FROM %s WHERE idempotency_archived_at IS NOT NULL AND idempotency_archived_at < %s ORDER BY idempotency_archived_at LIMIT %s",
		id, table, p(1), p(2))
	// PostgreSQL: the batch carries (scope, id), the key of a table
	// partitioned by tenant.
	selectedKey := fmt.Sprintf("SELECT %s, %s FROM %s WHERE idempotency_archived_at IS NOT NULL AND idempotency_archived_at < %s ORDER BY idempotency_archived_at LIMIT %s",
		scope, id, table, p(1), p(2))
	const clear = "idempotency_key = NULL, idempotency_status = NULL, idempotency_fingerprint = '', idempotency_response = NULL, " +
		"idempotency_attempt = 0, idempotency_lease_expires_at = NULL, idempotency_claimed_at = NULL, " +
		"idempotency_completed_at = NULL, idempotency_archived_at = NULL"
	args := []any{cutoff.UTC(), limit}
	if s.dialect == Postgres {
		if recordOnly {
			q := fmt.Sprintf("DELETE FROM %s WHERE (%s, %s) IN (%s FOR UPDATE SKIP LOCKED)", table, scope, id, selectedKey)
			return s.affected(ctx, ex, "purge", q, args...)
		}
		q := fmt.Sprintf("WITH batch AS (SELECT %s, %s, idempotency_status AS status FROM %s WHERE (%s, %s) IN (%s) FOR UPDATE SKIP LOCKED), "+
			"gone AS (DELETE FROM %s USING batch WHERE %s.%s = batch.%s AND %s.%s = batch.%s AND batch.status = 'failed' RETURNING 1), "+
			"cleared AS (UPDATE %s SET %s FROM batch WHERE %s.%s = batch.%s AND %s.%s = batch.%s AND batch.status <> 'failed' RETURNING 1) "+
			"SELECT (SELECT count(*) FROM gone) + (SELECT count(*) FROM cleared)",
			scope, id, table, scope, id, selectedKey,
			table, table, scope, scope, table, id, id,
			table, clear, table, scope, scope, table, id, id)
		return s.count(ctx, ex, "purge", q, args...)
	}
	if recordOnly {
		return s.affected(ctx, ex, "purge", fmt.Sprintf("DELETE FROM %s WHERE %s IN (%s)", table, id, selected), args...)
	}
	deleted, err := s.affected(ctx, ex, "purge", fmt.Sprintf("DELETE FROM %s WHERE %s IN (%s) AND idempotency_status = 'failed'", table, id, selected), args...)
	if err != nil {
		return 0, err
	}
	cleared, err := s.affected(ctx, ex, "purge", fmt.Sprintf("UPDATE %s SET %s WHERE %s IN (%s)", table, clear, id, selected), args...)
	return deleted + cleared, err
}

// pendingPredicate selects pending claims through the partial index on
// their lease (its predicate, then the status).
const pendingPredicate = "idempotency_claimed_at IS NOT NULL AND idempotency_completed_at IS NULL AND idempotency_status = 'pending'"

// PurgeAbandoned deletes up to limit pending claims of t whose lease ran out
// before cutoff: claims whose worker died and whose client never came back.
// Such a row is a claim, never a business fact (queries do not see it), and
// a request with its key would take it over anyway; past the horizon the
// key is forgotten like any other.
func (s *Store) PurgeAbandoned(ctx context.Context, ex Executor, t Table, cutoff time.Time, limit int) (int, error) {
	table, id, scope := quote(t.Name), quote(t.ID), quote(t.Scope)
	p := s.placeholders()
	key := id
	if s.dialect == Postgres {
		// (scope, id): the key of a table partitioned by tenant.
		key = "(" + scope + ", " + id + ")"
	}
	selected := fmt.Sprintf("SELECT %s FROM %s WHERE %s AND idempotency_lease_expires_at < %s ORDER BY idempotency_lease_expires_at LIMIT %s",
		strings.Trim(key, "()"), table, pendingPredicate, p(1), p(2))
	if s.dialect == Postgres {
		selected += " FOR UPDATE SKIP LOCKED"
	}
	return s.affected(ctx, ex, "purge abandoned", fmt.Sprintf("DELETE FROM %s WHERE %s IN (%s)", table, key, selected), cutoff.UTC(), limit)
}

// CountAbandoned counts the claims PurgeAbandoned would delete.
func (s *Store) CountAbandoned(ctx context.Context, ex Executor, t Table, cutoff time.Time) (int, error) {
	return s.count(ctx, ex, "count abandoned", fmt.Sprintf("SELECT count(*) FROM %s WHERE %s AND idempotency_lease_expires_at < %s",
		quote(t.Name), pendingPredicate, s.placeholders()(1)), cutoff.UTC())
}

// CountExpired counts the records of t that ArchiveBatch would move (for a
// dry run).
func (s *Store) CountExpired(ctx context.Context, ex Executor, t Table, cutoff time.Time) (int, error) {
	return s.count(ctx, ex, "count expired", fmt.Sprintf("SELECT count(*) FROM %s WHERE %s", quote(t.Name), s.expiredPredicate()), cutoff.UTC())
}

// CountPurgeable counts the tombstones of t that PurgeBatch would end.
func (s *Store) CountPurgeable(ctx context.Context, ex Executor, t Table, cutoff time.Time) (int, error) {
	return s.count(ctx, ex, "count tombstones", fmt.Sprintf("SELECT count(*) FROM %s WHERE idempotency_archived_at IS NOT NULL AND idempotency_archived_at < %s",
		quote(t.Name), s.placeholders()(1)), cutoff.UTC())
}

// TableStats counts the records of one table by state.
type TableStats struct {
	Pending, Succeeded, Failed, Tombstones int64
	// OldestPending is the claim time of the oldest pending record (zero
	// when there is none).
	OldestPending time.Time
}

// Stats reads t's counts. It scans the rows that have a key.
func (s *Store) Stats(ctx context.Context, ex Executor, t Table) (TableStats, error) {
	q := fmt.Sprintf(`SELECT
		COALESCE(SUM(CASE WHEN idempotency_status = 'pending' THEN 1 ELSE 0 END), 0),
		COALESCE(SUM(CASE WHEN idempotency_status = 'succeeded' AND idempotency_archived_at IS NULL THEN 1 ELSE 0 END), 0),
		COALESCE(SUM(CASE WHEN idempotency_status = 'failed' AND idempotency_archived_at IS NULL THEN 1 ELSE 0 END), 0),
		COALESCE(SUM(CASE WHEN idempotency_archived_at IS NOT NULL THEN 1 ELSE 0 END), 0),
		MIN(CASE WHEN idempotency_status = 'pending' THEN idempotency_claimed_at END)
		FROM %s WHERE idempotency_key IS NOT NULL`, quote(t.Name))
	rows, err := ex.QueryContext(ctx, q)
	if err != nil {
		return TableStats{}, &Error{Op: "stats", Err: err}
	}
	defer rows.Close()
	var st TableStats
	var oldest any
	if rows.Next() {
		if err := rows.Scan(&st.Pending, &st.Succeeded, &st.Failed, &st.Tombstones, &oldest); err != nil {
			return st, &Error{Op: "stats", Err: err}
		}
	}
	st.OldestPending = asTime(oldest)
	if err := rows.Err(); err != nil {
		return st, &Error{Op: "stats", Err: err}
	}
	return st, nil
}

// ArchiveStats counts the archive's rows and the bytes of their responses.
func (s *Store) ArchiveStats(ctx context.Context, ex Executor, archive string) (rowsN, bytes int64, err error) {
	length := "length"
	if s.dialect == Postgres {
		length = "octet_length"
	}
	rows, err := ex.QueryContext(ctx, fmt.Sprintf("SELECT count(*), COALESCE(SUM(%s(idempotency_response)), 0) FROM %s", length, quote(archive)))
	if err != nil {
		return 0, 0, &Error{Op: "archive stats", Err: err}
	}
	defer rows.Close()
	if rows.Next() {
		if err := rows.Scan(&rowsN, &bytes); err != nil {
			return 0, 0, &Error{Op: "archive stats", Err: err}
		}
	}
	return rowsN, bytes, rows.Err()
}

// Row is one record as operators see it.
type Row struct {
	Table       string
	Tenant      string
	Key         string
	Status      string
	Fingerprint string
	Attempt     int
	Response    []byte
	// Archived rows come from the archive table.
	Archived                                           bool
	LeaseExpiresAt, ClaimedAt, CompletedAt, ArchivedAt time.Time
}

const rowColumns = "idempotency_key, idempotency_status, idempotency_fingerprint, idempotency_attempt, idempotency_response, " +
	"idempotency_lease_expires_at, idempotency_claimed_at, idempotency_completed_at, idempotency_archived_at"

// Stuck lists up to limit pending records of t whose lease ran out before
// before (the partial index on pending leases), oldest first.
func (s *Store) Stuck(ctx context.Context, ex Executor, t Table, before time.Time, limit int) ([]Row, error) {
	p := s.placeholders()
	q := fmt.Sprintf("SELECT %s, %s FROM %s WHERE %s AND idempotency_lease_expires_at < %s ORDER BY idempotency_lease_expires_at LIMIT %s",
		quote(t.Scope), rowColumns, quote(t.Name), pendingPredicate, p(1), p(2))
	return s.rows(ctx, ex, t.Name, false, q, before.UTC(), limit)
}

// Failed lists up to limit failed records of t that still hold their
// response (not archived yet), newest first.
func (s *Store) Failed(ctx context.Context, ex Executor, t Table, limit int) ([]Row, error) {
	q := fmt.Sprintf("SELECT %s, %s FROM %s WHERE idempotency_status = 'failed' AND idempotency_archived_at IS NULL AND idempotency_completed_at IS NOT NULL "+
		"ORDER BY idempotency_completed_at DESC LIMIT %s", quote(t.Scope), rowColumns, quote(t.Name), s.placeholders()(1))
	return s.rows(ctx, ex, t.Name, false, q, limit)
}

// Find returns the record of (tenant, key) in t and its archived versions.
func (s *Store) Find(ctx context.Context, ex Executor, t Table, archive, tenant, key string) ([]Row, error) {
	p := s.placeholders()
	hot, err := s.rows(ctx, ex, t.Name, false,
		fmt.Sprintf("SELECT %s, %s FROM %s WHERE %s = %s AND idempotency_key = %s", quote(t.Scope), rowColumns, quote(t.Name), quote(t.Scope), p(1), p(2)),
		tenant, key)
	if err != nil || archive == "" {
		return hot, err
	}
	cold, err := s.rows(ctx, ex, t.Name, true,
		fmt.Sprintf("SELECT tenant_id, %s FROM %s WHERE record_table = %s AND tenant_id = %s AND idempotency_key = %s ORDER BY idempotency_claimed_at",
			rowColumnsArchive, quote(archive), p(3), p(1), p(2)),
		tenant, key, t.Name)
	return append(hot, cold...), err
}

// rowColumnsArchive reads the archive in rowColumns' order (it has no
// lease).
const rowColumnsArchive = "idempotency_key, idempotency_status, idempotency_fingerprint, idempotency_attempt, idempotency_response, " +
	"NULL, idempotency_claimed_at, idempotency_completed_at, idempotency_archived_at"

func (s *Store) rows(ctx context.Context, ex Executor, table string, archived bool, q string, args ...any) ([]Row, error) {
	rows, err := ex.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, &Error{Op: "list", Err: err}
	}
	defer rows.Close()
	var out []Row
	for rows.Next() {
		r := Row{Table: table, Archived: archived}
		var status, fingerprint, key *string
		var attempt *int64
		var lease, claimed, completed, archivedAt any
		if err := rows.Scan(&r.Tenant, &key, &status, &fingerprint, &attempt, &r.Response, &lease, &claimed, &completed, &archivedAt); err != nil {
			return nil, &Error{Op: "list", Err: err}
		}
		r.Key, r.Status, r.Fingerprint = deref(key), deref(status), deref(fingerprint)
		if attempt != nil {
			r.Attempt = int(*attempt)
		}
		r.LeaseExpiresAt, r.ClaimedAt, r.CompletedAt, r.ArchivedAt = asTime(lease), asTime(claimed), asTime(completed), asTime(archivedAt)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, &Error{Op: "list", Err: err}
	}
	return out, nil
}

func (s *Store) affected(ctx context.Context, ex Executor, op, q string, args ...any) (int, error) {
	res, err := ex.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, &Error{Op: op, Err: err}
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, &Error{Op: op, Err: err}
	}
	return int(n), nil
}

func (s *Store) count(ctx context.Context, ex Executor, op, q string, args ...any) (int, error) {
	rows, err := ex.QueryContext(ctx, q, args...)
	if err != nil {
		return 0, &Error{Op: op, Err: err}
	}
	defer rows.Close()
	var n int
	if rows.Next() {
		if err := rows.Scan(&n); err != nil {
			return 0, &Error{Op: op, Err: err}
		}
	}
	if err := rows.Err(); err != nil {
		return 0, &Error{Op: op, Err: err}
	}
	return n, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// sqliteTimeLayouts are the forms SQLite hands back times in when a column
// type does not tell the driver to parse them (expressions, NULL columns).
var sqliteTimeLayouts = []string{
	"2006-01-02 15:04:05.999999999-07:00",
	"2006-01-02T15:04:05.999999999-07:00",
	"2006-01-02 15:04:05.999999999",
	time.RFC3339Nano,
}

func asTime(v any) time.Time {
	switch t := v.(type) {
	case time.Time:
		return t.UTC()
	case string:
		for _, layout := range sqliteTimeLayouts {
			if parsed, err := time.Parse(layout, t); err == nil {
				return parsed.UTC()
			}
		}
	case []byte:
		return asTime(string(t))
	}
	return time.Time{}
}
