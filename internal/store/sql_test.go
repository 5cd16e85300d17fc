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
	for backend, sql := range map[string]statements{"postgres": postgresSQL, "sqlite": sqliteSQL} {
		st := sql.forTable(tableKey{table: Table{Name: "t", Scope: "s", ID: "id"}, archive: "a"})
		for name, q := range st {
			for _, c := range column.FindAllString(q, -1) {
				if !slices.Contains(record.Columns, c) {
					t.Errorf("%s statement %d names %s, which is not a record column", backend, name, c)
				}
			}
			if strings.ContainsAny(q, "{}") {
				t.Errorf("%s statement %d has a marker left: %s", backend, name, q)
			}
		}
	}
	for name, q := range sqliteSQL {
		if strings.Contains(q, "$") {
			t.Errorf("sqlite statement %d has a PostgreSQL placeholder: %s", name, q)
		}
	}
}
