package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"ariga.io/atlas/sql/migrate"
)

// RevisionsTable is the table, in the migrated schema, that records which
// migration files ran. Its columns are those of Atlas's own revisions table
// (atlas_schema_revisions), so the history reads the same in both tools.
const RevisionsTable = "atlas_schema_revisions"

// revisionSQL is the revisions table's SQL on one database.
type revisionSQL struct {
	create string // CREATE TABLE IF NOT EXISTS
	exists string // one boolean: the current schema has the table; argument: its name
	one    string // the WHERE clause of one version
	delete string // DELETE one version
	upsert string // INSERT or UPDATE one revision; arguments as WriteRevision passes them
}

const revisionColumnList = `version, description, type, applied, total,
		executed_at, execution_time, error, error_stmt, hash, partial_hashes, operator_version`

var postgresRevisionSQL = revisionSQL{
	create: `CREATE TABLE IF NOT EXISTS ` + RevisionsTable + ` (
	version          character varying NOT NULL PRIMARY KEY,
	description      character varying NOT NULL,
	type             bigint NOT NULL DEFAULT 2,
	applied          bigint NOT NULL DEFAULT 0,
	total            bigint NOT NULL DEFAULT 0,
	executed_at      timestamptz NOT NULL,
	execution_time   bigint NOT NULL,
	error            text NULL,
	error_stmt       text NULL,
	hash             character varying NOT NULL,
	partial_hashes   jsonb NULL,
	operator_version character varying NOT NULL
)`,
	exists: `SELECT EXISTS (SELECT 1 FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = $1)`,
	one:    `version = $1`,
	delete: `DELETE FROM ` + RevisionsTable + ` WHERE version = $1`,
	upsert: `INSERT INTO ` + RevisionsTable + ` (` + revisionColumnList + `)
	VALUES ($1, $2, $3, $4, $5, $6, $7, nullif($8, ''), nullif($9, ''), $10, $11::jsonb, $12)
	ON CONFLICT (version) DO UPDATE SET description = excluded.description, type = excluded.type,
		applied = excluded.applied, total = excluded.total, executed_at = excluded.executed_at,
		execution_time = excluded.execution_time, error = excluded.error, error_stmt = excluded.error_stmt,
		hash = excluded.hash, partial_hashes = excluded.partial_hashes, operator_version = excluded.operator_version`,
}

// mysqlRevisionSQL is the same table on MySQL and MariaDB: DATETIME(6) in
// UTC (idemdb.MySQLDSN's loc=UTC), JSON (LONGTEXT on MariaDB). The upsert
// reads VALUES(), which both have (MySQL 8's row alias is not MariaDB's).
var mysqlRevisionSQL = revisionSQL{
	create: `CREATE TABLE IF NOT EXISTS ` + RevisionsTable + ` (
	version          varchar(255) NOT NULL PRIMARY KEY,
	description      varchar(255) NOT NULL,
	type             bigint NOT NULL DEFAULT 2,
	applied          bigint NOT NULL DEFAULT 0,
	total            bigint NOT NULL DEFAULT 0,
	executed_at      datetime(6) NOT NULL,
	execution_time   bigint NOT NULL,
	error            longtext NULL,
	error_stmt       longtext NULL,
	hash             varchar(255) NOT NULL,
	partial_hashes   json NULL,
	operator_version varchar(255) NOT NULL
) CHARSET utf8mb4 COLLATE utf8mb4_bin`,
	exists: `SELECT EXISTS (SELECT 1 FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = ?)`,
	one:    `version = ?`,
	delete: `DELETE FROM ` + RevisionsTable + ` WHERE version = ?`,
	upsert: `INSERT INTO ` + RevisionsTable + ` (` + revisionColumnList + `)
	VALUES (?, ?, ?, ?, ?, ?, ?, nullif(?, ''), nullif(?, ''), ?, ?, ?)
	ON DUPLICATE KEY UPDATE description = VALUES(description), type = VALUES(type),
		applied = VALUES(applied), total = VALUES(total), executed_at = VALUES(executed_at),
		execution_time = VALUES(execution_time), error = VALUES(error), error_stmt = VALUES(error_stmt),
		hash = VALUES(hash), partial_hashes = VALUES(partial_hashes), operator_version = VALUES(operator_version)`,
}

// execQuerier is what both *sql.DB and *sql.Tx offer.
type execQuerier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// revisions is a migrate.RevisionReadWriter on RevisionsTable, through a
// connection pool or, while a file runs, through that file's transaction.
type revisions struct {
	conn execQuerier
	sql  revisionSQL
}

var _ migrate.RevisionReadWriter = revisions{}

// ensureRevisionsTable creates the table if it does not exist.
func (r revisions) ensureTable(ctx context.Context) error {
	if _, err := r.conn.ExecContext(ctx, r.sql.create); err != nil {
		return fmt.Errorf("create %s: %w", RevisionsTable, err)
	}
	return nil
}

// revisionsTableExists reports whether the current schema has the table.
func (r revisions) tableExists(ctx context.Context) (bool, error) {
	var exists bool
	err := r.conn.QueryRowContext(ctx, r.sql.exists, RevisionsTable).Scan(&exists)
	return exists, err
}

// Ident implements migrate.RevisionReadWriter. The schema is left empty: the
// table lives in the connection's current schema.
func (revisions) Ident() *migrate.TableIdent {
	return &migrate.TableIdent{Name: RevisionsTable}
}

const revisionColumns = `version, description, type, applied, total, executed_at, execution_time,
	coalesce(error, ''), coalesce(error_stmt, ''), hash, partial_hashes, operator_version`

// ReadRevisions implements migrate.RevisionReadWriter: all revisions, by
// version (the executor relies on the order).
func (r revisions) ReadRevisions(ctx context.Context) ([]*migrate.Revision, error) {
	rows, err := r.conn.QueryContext(ctx, `SELECT `+revisionColumns+` FROM `+RevisionsTable+` ORDER BY version`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var revs []*migrate.Revision
	for rows.Next() {
		rev, err := scanRevision(rows)
		if err != nil {
			return nil, err
		}
		revs = append(revs, rev)
	}
	return revs, rows.Err()
}

// ReadRevision implements migrate.RevisionReadWriter.
func (r revisions) ReadRevision(ctx context.Context, version string) (*migrate.Revision, error) {
	rows, err := r.conn.QueryContext(ctx, `SELECT `+revisionColumns+` FROM `+RevisionsTable+` WHERE `+r.sql.one, version)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return nil, err
		}
		return nil, migrate.ErrRevisionNotExist
	}
	return scanRevision(rows)
}

func scanRevision(rows *sql.Rows) (*migrate.Revision, error) {
	var (
		rev     migrate.Revision
		typ     int64
		exec    int64
		partial []byte
	)
	if err := rows.Scan(&rev.Version, &rev.Description, &typ, &rev.Applied, &rev.Total, &rev.ExecutedAt,
		&exec, &rev.Error, &rev.ErrorStmt, &rev.Hash, &partial, &rev.OperatorVersion); err != nil {
		return nil, err
	}
	rev.Type, rev.ExecutionTime = migrate.RevisionType(typ), time.Duration(exec)
	if len(partial) > 0 {
		if err := json.Unmarshal(partial, &rev.PartialHashes); err != nil {
			return nil, fmt.Errorf("revision %s: partial_hashes: %w", rev.Version, err)
		}
	}
	return &rev, nil
}

// WriteRevision implements migrate.RevisionReadWriter (an upsert).
func (r revisions) WriteRevision(ctx context.Context, rev *migrate.Revision) error {
	var partial any
	if len(rev.PartialHashes) > 0 {
		b, err := json.Marshal(rev.PartialHashes)
		if err != nil {
			return err
		}
		partial = string(b)
	}
	_, err := r.conn.ExecContext(ctx, r.sql.upsert,
		rev.Version, rev.Description, int64(rev.Type), rev.Applied, rev.Total, rev.ExecutedAt,
		int64(rev.ExecutionTime), rev.Error, rev.ErrorStmt, rev.Hash, partial, rev.OperatorVersion)
	return err
}

// DeleteRevision implements migrate.RevisionReadWriter.
func (r revisions) DeleteRevision(ctx context.Context, version string) error {
	_, err := r.conn.ExecContext(ctx, `DELETE FROM `+RevisionsTable+` WHERE `+r.sql.one, version)
	return err
}

// dirty reports whether rev records a file that failed or stopped midway.
func dirty(rev *migrate.Revision) bool {
	return !rev.Type.Has(migrate.RevisionTypeBaseline) && (rev.Error != "" || rev.Applied < rev.Total)
}
