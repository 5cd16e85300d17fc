package idemdb_test

import (
	"fmt"

	"github.com/goovo/idem/idemdb"
)

// SQLite is opened with the settings the claim protocol needs: a busy
// timeout, WAL, foreign keys, immediate transactions, and times stored in a
// form the record store can compare.
func ExampleSQLiteDSN() {
	fmt.Println(idemdb.SQLiteDSN("app.db"))
	// Output: file:app.db?_pragma=busy_timeout%285000%29&_pragma=journal_mode%28WAL%29&_pragma=foreign_keys%281%29&_time_format=sqlite&_txlock=immediate
}

func ExampleResolve() {
	for _, dsn := range []string{"postgres://app@db:5432/app", "sqlite:app.db", "/var/lib/app/app.db"} {
		driver, _, dialect := idemdb.Resolve(dsn)
		fmt.Println(driver, dialect)
	}
	// Output:
	// pgx postgres
	// sqlite-idem sqlite3
	// sqlite-idem sqlite3
}
