package idemtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"entgo.io/ent/dialect/sql/schema"
	"github.com/go-sql-driver/mysql"

	"github.com/goovo/idem/idembackend"
	"github.com/goovo/idem/idemdb"
	"github.com/goovo/idem/idempartition"
)

// Kind names a kind of database the framework supports.
type Kind string

// The kinds of database.
const (
	SQLite   Kind = "sqlite"
	Postgres Kind = "postgres"
	// PostgresPartitioned is PostgreSQL with the ent schema's tables
	// hash-partitioned by tenant (idempartition.ByTenant, with
	// TestPartitions partitions): the layout of docs/scale-out.md. Its
	// tables are made by DB.Setup, which a suite must call.
	PostgresPartitioned Kind = "postgres-partitioned"
	// MariaDB is MariaDB (or MySQL) on ent's "mysql" dialect, at
	// TEST_MYSQL_URL: each test gets a database of its own.
	MariaDB Kind = "mariadb"
)

// TestPartitions is the number of hash partitions of each table on
// PostgresPartitioned: few, so that a test's tenants land in several.
const TestPartitions = 4

// DefaultPostgresURL is used when TEST_DATABASE_URL is not set.
const DefaultPostgresURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// Kinds returns the kinds of database a behavioural suite runs on: all
// four, always.
func Kinds() []Kind { return []Kind{SQLite, Postgres, PostgresPartitioned, MariaDB} }

// RiverKinds returns the kinds of database on which River runs, and with
// it idemoutbox: every kind but MariaDB (River has no MySQL driver;
// idemoutbox.ErrMySQL). The example application (package graph,
// cmd/server) runs on every kind, on MariaDB with a receipt table of its
// own instead of River.
func RiverKinds() []Kind { return []Kind{SQLite, Postgres, PostgresPartitioned} }

// IsPostgres reports whether the kind is PostgreSQL (partitioned or not).
func (b Kind) IsPostgres() bool { return b == Postgres || b == PostgresPartitioned }

// DefaultMySQLURL is used when TEST_MYSQL_URL is not set: the MariaDB of
// every development machine and CI runner of the project.
const DefaultMySQLURL = "root@tcp(127.0.0.1:3306)/test"

// MySQLURL returns TEST_MYSQL_URL or DefaultMySQLURL as a mysql:// URL
// (idemdb.MySQLDSN): TEST_MYSQL_URL may be such a URL or a
// go-sql-driver data source (user:password@tcp(host:port)/database).
func MySQLURL() (string, error) {
	dsn := os.Getenv("TEST_MYSQL_URL")
	if dsn == "" {
		dsn = DefaultMySQLURL
	}
	if idemdb.IsMySQL(dsn) {
		return dsn, nil
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return "", fmt.Errorf("idemtest: TEST_MYSQL_URL: %w", err)
	}
	u := url.URL{Scheme: "mysql", Host: cfg.Addr, Path: "/" + cfg.DBName}
	if cfg.Passwd != "" {
		u.User = url.UserPassword(cfg.User, cfg.Passwd)
	} else if cfg.User != "" {
		u.User = url.User(cfg.User)
	}
	return u.String(), nil
}

// PostgresURL returns TEST_DATABASE_URL or DefaultPostgresURL.
func PostgresURL() string {
	if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
		return u
	}
	return DefaultPostgresURL
}

// PostgresURLOf returns PostgresURL with its database replaced by database
// (same server, user and parameters): for tests of another database, such
// as one that does not exist.
func PostgresURLOf(database string) string {
	u, err := url.Parse(PostgresURL())
	if err != nil {
		return PostgresURL() // not a URL: the caller's test fails on it
	}
	u.Path = "/" + database
	return u.String()
}

// Driver is an ent driver with a database/sql view of its database.
type Driver = idemdb.Driver

// DB is a fresh database of one test.
type DB struct {
	// Kind is the kind of database.
	Kind Kind
	// DSN opens more connections to the same database (idemdb.Open), for
	// example from another process.
	DSN string
	// Driver is an ent driver on it, closed when the test ends: on
	// PostgreSQL pgx's (idemdb.Open), on which the hook's store
	// pipelines, unless IDEMTEST_POSTGRES_DRIVER=database/sql selects
	// database/sql's (idemdb.OpenSQL); on SQLite database/sql's.
	Driver Driver
	// Partitioning is what Setup made of the tables on
	// PostgresPartitioned; nil on the other kinds.
	Partitioning *idempartition.Partitioning

	setUp  bool
	remove func() error // drops what Connect made
}

// Setup makes the application's tables: create (the ent client's
// Schema.Create) and then, on PostgresPartitioned, idempartition.ByTenant
// on the ent package's backend (client.IdempotencyBackend()). Ent's
// automatic migration must not run on that database again.
//
//	err := db.Setup(ctx, client.IdempotencyBackend(), client.Schema.Create)
func (db *DB) Setup(ctx context.Context, backend idembackend.Backend, create func(context.Context, ...schema.MigrateOption) error) error {
	db.setUp = true
	if err := create(ctx); err != nil {
		return fmt.Errorf("idemtest: create the schema: %w", err)
	}
	if db.Kind != PostgresPartitioned {
		return nil
	}
	p, err := idempartition.ByTenant(ctx, backend, idempartition.Options{Partitions: TestPartitions})
	if err != nil {
		return fmt.Errorf("idemtest: %w", err)
	}
	db.Partitioning = p
	return nil
}

// Open returns an empty database for t: a SQLite file in a directory of
// its own, a PostgreSQL schema of its own, selected with search_path so
// that the application's tables need no prefix, or a MariaDB database of
// its own; it is removed when the test
// ends. Make the tables with DB.Setup: on PostgresPartitioned it partitions
// them.
func Open(t testing.TB, kind Kind) *DB {
	t.Helper()
	db, err := Connect(context.Background(), kind)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// A pool closes once every connection is back: a connection, a
		// transaction or rows that a failed test did not give back would
		// make this wait for ever, and the test would end at the package's
		// timeout instead of with its own failure.
		closed := make(chan error, 1)
		go func() { closed <- db.Close() }()
		select {
		case err := <-closed:
			if err != nil {
				t.Logf("%v", err)
			}
		case <-time.After(closeBound):
			t.Errorf("idemtest: the %s database still has connections in use %v after the test: something the test holds (a connection, a transaction, rows) was not given back; not waiting for it", kind, closeBound)
		}
	})
	if kind == PostgresPartitioned {
		// A suite that made its tables without Setup ran on plain
		// PostgreSQL: say so rather than pass as if partitioned.
		t.Cleanup(func() {
			if !db.setUp && !t.Failed() {
				t.Errorf("idemtest: %s: the tables were not made with DB.Setup, so they were not partitioned", kind)
			}
		})
	}
	return db
}

// closeBound is how long Open's cleanup waits for the database to close.
const closeBound = time.Minute

// Connect is Open for code that has no testing.TB: a TestMain that shares
// one database among the tests of a package, or an example. Close removes
// the database.
func Connect(ctx context.Context, kind Kind) (*DB, error) {
	var (
		dsn    string
		remove func() error
		err    error
	)
	switch kind {
	case SQLite:
		var dir string
		if dir, err = os.MkdirTemp("", "idemtest-"); err != nil {
			return nil, fmt.Errorf("idemtest: %w", err)
		}
		dsn, remove = filepath.Join(dir, "test.db"), func() error { return os.RemoveAll(dir) }
	case Postgres, PostgresPartitioned:
		if dsn, remove, err = newPostgresSchema(ctx); err != nil {
			return nil, err
		}
	case MariaDB:
		if dsn, remove, err = newMySQLDatabase(ctx); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("idemtest: unknown backend %q", kind)
	}
	var drv Driver
	if kind.IsPostgres() && os.Getenv("IDEMTEST_POSTGRES_DRIVER") != "database/sql" {
		drv, err = idemdb.Open(dsn)
	} else {
		drv, err = idemdb.OpenSQL(dsn, idemdb.Pool{})
	}
	if err != nil {
		return nil, errors.Join(fmt.Errorf("idemtest: %w", err), remove())
	}
	return &DB{Kind: kind, DSN: dsn, Driver: drv, remove: remove}, nil
}

// Close closes the driver and removes the database: the SQLite file, or
// the PostgreSQL schema with everything in it.
func (db *DB) Close() error {
	return errors.Join(db.Driver.Close(), db.remove())
}

// newMySQLDatabase creates a database on the server of MySQLURL and
// returns its URL, and a func that drops it.
func newMySQLDatabase(ctx context.Context) (dsn string, drop func() error, err error) {
	base, err := MySQLURL()
	if err != nil {
		return "", nil, err
	}
	source, err := idemdb.MySQLDSN(base)
	if err != nil {
		return "", nil, fmt.Errorf("idemtest: TEST_MYSQL_URL: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	admin, err := sql.Open("mysql", source)
	if err != nil {
		return "", nil, fmt.Errorf("idemtest: %w", err)
	}
	defer admin.Close()
	if err := admin.PingContext(ctx); err != nil {
		return "", nil, fmt.Errorf("idemtest: MariaDB at %s is unreachable (set TEST_MYSQL_URL, or start it): %w", redact(base), err)
	}
	suffix := make([]byte, 6)
	_, _ = rand.Read(suffix)
	name := "idemtest_" + hex.EncodeToString(suffix)
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name+" CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"); err != nil {
		return "", nil, fmt.Errorf("idemtest: create database: %w", err)
	}
	drop = func() error {
		db, err := sql.Open("mysql", source)
		if err != nil {
			return fmt.Errorf("idemtest: drop database %s: %w", name, err)
		}
		defer db.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := db.ExecContext(ctx, "DROP DATABASE "+name); err != nil {
			return fmt.Errorf("idemtest: drop database %s: %w", name, err)
		}
		return nil
	}
	u, _ := url.Parse(base)
	u.Path = "/" + name
	return u.String(), drop, nil
}

// newPostgresSchema creates a schema and returns a URL whose search_path is
// that schema, and a func that drops it.
func newPostgresSchema(ctx context.Context) (dsn string, drop func() error, err error) {
	base := PostgresURL()
	u, err := url.Parse(base)
	if err != nil {
		return "", nil, fmt.Errorf("idemtest: TEST_DATABASE_URL: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	admin, err := sql.Open("pgx", base)
	if err != nil {
		return "", nil, fmt.Errorf("idemtest: %w", err)
	}
	defer admin.Close()
	if err := admin.PingContext(ctx); err != nil {
		return "", nil, fmt.Errorf("idemtest: PostgreSQL at %s is unreachable (set TEST_DATABASE_URL, or start it): %w", redact(base), err)
	}
	suffix := make([]byte, 6)
	_, _ = rand.Read(suffix)
	schema := "idemtest_" + hex.EncodeToString(suffix)
	if _, err := admin.ExecContext(ctx, "CREATE SCHEMA "+schema); err != nil {
		return "", nil, fmt.Errorf("idemtest: create schema: %w", err)
	}
	drop = func() error {
		db, err := sql.Open("pgx", base)
		if err != nil {
			return fmt.Errorf("idemtest: drop schema %s: %w", schema, err)
		}
		defer db.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := db.ExecContext(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			return fmt.Errorf("idemtest: drop schema %s: %w", schema, err)
		}
		return nil
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String(), drop, nil
}

func redact(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// String implements fmt.Stringer.
func (b Kind) String() string { return string(b) }

var _ fmt.Stringer = Kind("")
