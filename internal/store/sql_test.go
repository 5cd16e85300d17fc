package store

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/goovo/idem/internal/record"
)

// The SQL names the record's columns as package record does (the one
// source of them), and every marker is substituted.
func TestStatementsUseTheRecordColumns(t *testing.T) {
	column := regexp.MustCompile(`idempotency_[a-z_]+`)
	for backend, sql := range map[string]statements{"postgres": postgresSQL, "sqlite": sqliteSQL, "mysql": mysqlSQL} {
		st := sql.forTable(tableKey{table: Table{Name: "t", Scope: "s", ID: "id"}, archive: "a"}, Quote)
		for name, q := range st {
			for _, c := range column.FindAllString(q, -1) {
				if !slices.Contains(record.Columns, c) {
					t.Errorf("%s statement %d names %s, which is not a record column", backend, name, c)
				}
			}
			if strings.ContainsAny(strings.ReplaceAll(q, "{ids}", ""), "{}") { // {ids}: a batch's, at each run
				t.Errorf("%s statement %d has a marker left: %s", backend, name, q)
			}
		}
	}
	for name, q := range sqliteSQL {
		if strings.Contains(q, "$") {
			t.Errorf("sqlite statement %d has a PostgreSQL placeholder: %s", name, q)
		}
	}
	for name, q := range mysqlSQL {
		if strings.Contains(q, "RETURNING") || strings.Contains(q, "ON CONFLICT") || strings.Contains(q, "AS TEXT") {
			t.Errorf("mysql statement %d has PostgreSQL's SQL, which MySQL 8 lacks: %s", name, q)
		}
	}
}

// MySQL's placeholders are positional: a numbered one used twice, or out
// of order, takes its argument where it stands.
func TestBindNumbered(t *testing.T) {
	q, args := bindNumbered(`SELECT $2, $1 WHERE ($2 = '' OR x = $2) LIMIT $10`, []any{"a", "b", 3, 4, 5, 6, 7, 8, 9, 10})
	if q != `SELECT ?, ? WHERE (? = '' OR x = ?) LIMIT ?` || !slices.Equal(args, []any{"b", "a", "b", "b", 10}) {
		t.Fatalf("%s %v", q, args)
	}
}
