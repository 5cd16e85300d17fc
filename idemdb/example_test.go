package idemdb_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

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

// A server process sizes its pool from the database's budget and, at
// start, waits for a database that is not up yet.
func ExampleOpenPool() {
	drv, err := idemdb.OpenPool("postgres://app@pgbouncer:6432/app?default_query_exec_mode=exec",
		idemdb.Pool{MaxConns: 10})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer drv.Close()
	fmt.Println(drv.DB().Stats().MaxOpenConnections)
	// A main would now wait for the database, up to a minute:
	//	err = idemdb.WaitReady(ctx, drv.DB(), time.Minute, logger)
	// Output: 10
}

// At start, a server waits for its database: here a SQLite file, which is
// always ready; a PostgreSQL that is down, restarting or full is retried
// with backoff until the timeout.
func ExampleWaitReady() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	drv, err := idemdb.Open(filepath.Join(dir, "app.db"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer drv.Close()
	err = idemdb.WaitReady(context.Background(), drv.DB(), time.Minute, slog.Default())
	fmt.Println("ready:", err == nil)
	// Output: ready: true
}
