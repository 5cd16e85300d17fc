package idembackend

import (
	"context"
	stdsql "database/sql"
	"errors"
	"strings"

	"entgo.io/ent/dialect"
	"entgo.io/ent/dialect/sql/sqlgraph"
	"github.com/go-sql-driver/mysql"
)

// mysqlDuplicateKey is MySQL's and MariaDB's ER_DUP_ENTRY.
const mysqlDuplicateKey = 1062

// createMySQL is Create on MySQL and MariaDB, which have no ON CONFLICT:
// the claim is a plain INSERT, and a duplicate-key error (1062) on the
// claim's unique index is the answer "the key is taken" (sql.ErrNoRows,
// as on the other backends).
//
// ent writes DoNothing as ON DUPLICATE KEY UPDATE id = id, and INSERT
// IGNORE would do as well, but both swallow a conflict on any unique
// index (a business column's too, which must stay the input's error) and
// the second turns refused values (bytes that are not UTF-8, too long a
// text) into warnings and stores something else. A plain INSERT under
// InnoDB behaves as PostgreSQL's ON CONFLICT DO NOTHING for the
// arbitration: an insert of a key another open transaction inserted waits
// for that transaction, then fails with 1062 if it committed, or inserts
// if it rolled back. (Three or more such waiters of one rolled-back key
// can deadlock, 1213: the store classifies it as a conflict, to retry.)
func (ci *ClaimInsert) createMySQL(ctx context.Context, drv dialect.Driver, spec *sqlgraph.CreateSpec) error {
	if !rowOnly(spec) {
		spec.OnConflict = nil
		return ci.taken(sqlgraph.CreateNode(ctx, drv, spec))
	}
	stmt, err := ci.statement(dialect.MySQL, spec)
	if err != nil {
		return err
	}
	args, err := claimArgs(spec)
	if err != nil {
		return err
	}
	var res stdsql.Result
	if err := drv.Exec(ctx, stmt.query, args, &res); err != nil {
		return ci.taken(err)
	}
	if spec.ID.Value != nil {
		return nil // set by the caller (a UUID): the row has it
	}
	// As sqlgraph on MySQL: the auto-increment id.
	id, err := res.LastInsertId()
	if err != nil {
		return err
	}
	spec.ID.Value = id
	return nil
}

// taken makes err sql.ErrNoRows when it is a duplicate key of the claim's
// unique index (the key is taken), and leaves every other error, a
// duplicate of another unique index included, as it is.
func (ci *ClaimInsert) taken(err error) error {
	if IsMySQLDuplicateOf(err, ci.Conflict) {
		return stdsql.ErrNoRows
	}
	return err
}

// IsMySQLDuplicateOf reports whether err is MySQL's or MariaDB's
// duplicate-key error (1062) on the unique index of columns, as ent names
// an index it creates: the entity's name, then the columns, joined by
// "_" (MariaDB quotes the index as 'name', MySQL 8 as 'table.name').
func IsMySQLDuplicateOf(err error, columns []string) bool {
	var my *mysql.MySQLError
	if !errors.As(err, &my) || my.Number != mysqlDuplicateKey {
		return false
	}
	return strings.HasSuffix(my.Message, "_"+strings.Join(columns, "_")+"'")
}
