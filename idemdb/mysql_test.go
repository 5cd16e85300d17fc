package idemdb_test

import (
	"context"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/goovo/idem/idemdb"
	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/testkit"
	testent "github.com/goovo/idem/internal/testkit/testapp/ent"
)

// A mysql:// URL becomes go-sql-driver's data source with what the
// protocol needs, the URL's own settings winning; a URL without a
// database is refused when it is opened.
func TestMySQLDSN(t *testing.T) {
	dsn, err := idemdb.MySQLDSN("mysql://app:s3cret@db.example/app?timeout=3s&parseTime=false")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Addr != "db.example:3306" || cfg.DBName != "app" || cfg.User != "app" || cfg.Passwd != "s3cret" ||
		!cfg.ClientFoundRows || cfg.Collation != "utf8mb4_bin" || cfg.Loc.String() != "UTC" || cfg.Timeout.String() != "3s" ||
		cfg.ParseTime || !strings.Contains(cfg.Params["sql_mode"], "STRICT_ALL_TABLES") {
		t.Fatalf("%s -> %+v", dsn, cfg)
	}
	if _, err := idemdb.Open("mysql://app@db.example"); err == nil || !strings.Contains(err.Error(), "names no database") {
		t.Fatalf("a URL without a database: %v", err)
	}
}

// Processes started at the same moment on an empty MariaDB database each
// migrate automatically, under MigrateLocked's named lock: every one of
// them starts.
func TestConcurrentMySQLMigrationsAllSucceed(t *testing.T) {
	db := idemtest.Open(t, idemtest.MariaDB)
	drivers := testkit.MigrateAtOnce(t, db.DSN, 4, func(ctx context.Context, drv idemdb.Driver) error {
		client := testent.NewClient(testent.Driver(drv))
		return idemdb.MigrateLocked(ctx, drv, func(ctx context.Context) error { return client.Schema.Create(ctx) })
	})
	var n int
	if err := drivers[0].DB().QueryRowContext(t.Context(), "SELECT count(*) FROM shipments").Scan(&n); err != nil || n != 0 {
		t.Fatalf("the tables after the migrations: %d rows, %v", n, err)
	}
}
