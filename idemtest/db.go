// Package idemtest helps applications test their idempotent mutations
// against real databases: a fresh, isolated database per test on SQLite,
// PostgreSQL, or PostgreSQL with the tables hash-partitioned by tenant, and
// the list of backends to run a suite on.
//
//	for _, backend := range idemtest.Backends() {
//		t.Run(string(backend), func(t *testing.T) {
//			db := idemtest.Open(t, backend)
//			client := ent.NewClient(ent.Driver(db.Driver))
//			if err := db.Setup(ctx, client.IdempotencyBackend(), client.Schema.Create); err != nil {
//				t.Fatal(err)
//			}
//			...
//		})
//	}
//
// PostgreSQL tests read TEST_DATABASE_URL (default
// postgres://postgres@127.0.0.1:5432/test?sslmode=disable). A database that
// cannot be reached fails the test: it is never skipped.
package idemtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	entsql "entgo.io/ent/dialect/sql"
	"entgo.io/ent/dialect/sql/schema"

	"github.com/goovo/idem"
	"github.com/goovo/idem/idemdb"
)

// Backend names a database the framework supports.
type Backend string

// The backends.
const (
	SQLite   Backend = "sqlite"
	Postgres Backend = "postgres"
	// PostgresPartitioned is PostgreSQL with the ent schema's tables
	// hash-partitioned by tenant (idemdb.PartitionByTenant, with
	// TestPartitions partitions): the layout of docs/scale-out.md. Its
	// tables are made by DB.Setup, which a suite must call.
	PostgresPartitioned Backend = "postgres-partitioned"
)

// TestPartitions is the number of hash partitions of each table on
// PostgresPartitioned: few, so that a test's tenants land in several.
const TestPartitions = 4

// DefaultPostgresURL is used when TEST_DATABASE_URL is not set.
const DefaultPostgresURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// Backends returns the backends a behavioural suite runs on: all three,
// always.
func Backends() []Backend { return []Backend{SQLite, Postgres, PostgresPartitioned} }

// IsPostgres reports whether the backend is PostgreSQL (partitioned or not).
func (b Backend) IsPostgres() bool { return b == Postgres || b == PostgresPartitioned }

// PostgresURL returns TEST_DATABASE_URL or DefaultPostgresURL.
func PostgresURL() string {
	if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
		return u
	}
	return DefaultPostgresURL
}

// DB is a fresh database of one test.
type DB struct {
	Backend Backend
	// DSN opens more connections to the same database (idemdb.Open), for
	// example from another process.
	DSN string
	// Driver is an ent driver on it, closed when the test ends.
	Driver *entsql.Driver
	// Partitioning is what Setup made of the tables on
	// PostgresPartitioned; nil on the other backends.
	Partitioning *idemdb.Partitioning

	setUp bool
}

// Setup makes the application's tables: create (the ent client's
// Schema.Create) and then, on PostgresPartitioned, idemdb.PartitionByTenant
// on the ent package's backend (client.IdempotencyBackend()). Ent's
// automatic migration must not run on that database again.
//
//	err := db.Setup(ctx, client.IdempotencyBackend(), client.Schema.Create)
func (db *DB) Setup(ctx context.Context, backend idem.Backend, create func(context.Context, ...schema.MigrateOption) error) error {
	db.setUp = true
	if err := create(ctx); err != nil {
		return fmt.Errorf("idemtest: create the schema: %w", err)
	}
	if db.Backend != PostgresPartitioned {
		return nil
	}
	p, err := idemdb.PartitionByTenant(ctx, backend, idemdb.PartitionOptions{Partitions: TestPartitions})
	if err != nil {
		return fmt.Errorf("idemtest: %w", err)
	}
	db.Partitioning = p
	return nil
}

// Open returns an empty database for t: a SQLite file in t.TempDir(), or a
// PostgreSQL schema of its own (dropped when the test ends), selected with
// search_path so that the application's tables need no prefix. Make the
// tables with DB.Setup: on PostgresPartitioned it partitions them.
func Open(t testing.TB, backend Backend) *DB {
	t.Helper()
	var dsn string
	switch backend {
	case SQLite:
		dsn = filepath.Join(t.TempDir(), "test.db")
	case Postgres, PostgresPartitioned:
		dsn = newPostgresSchema(t)
	default:
		t.Fatalf("idemtest: unknown backend %q", backend)
	}
	drv, err := idemdb.Open(dsn)
	if err != nil {
		t.Fatalf("idemtest: %v", err)
	}
	t.Cleanup(func() { drv.Close() })
	db := &DB{Backend: backend, DSN: dsn, Driver: drv}
	if backend == PostgresPartitioned {
		// A suite that made its tables without Setup ran on plain
		// PostgreSQL: say so rather than pass as if partitioned.
		t.Cleanup(func() {
			if !db.setUp && !t.Failed() {
				t.Errorf("idemtest: %s: the tables were not made with DB.Setup, so they were not partitioned", backend)
			}
		})
	}
	return db
}

// newPostgresSchema creates a schema and returns a URL whose search_path is
// that schema.
func newPostgresSchema(t testing.TB) string {
	t.Helper()
	base := PostgresURL()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	admin, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatalf("idemtest: %v", err)
	}
	defer admin.Close()
	if err := admin.PingContext(ctx); err != nil {
		t.Fatalf("idemtest: PostgreSQL at %s is unreachable (set TEST_DATABASE_URL, or start it): %v", redact(base), err)
	}
	suffix := make([]byte, 6)
	_, _ = rand.Read(suffix)
	schema := "idemtest_" + hex.EncodeToString(suffix)
	if _, err := admin.ExecContext(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("idemtest: create schema: %v", err)
	}
	t.Cleanup(func() {
		db, err := sql.Open("pgx", base)
		if err != nil {
			return
		}
		defer db.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := db.ExecContext(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Logf("idemtest: drop schema %s: %v", schema, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("idemtest: TEST_DATABASE_URL: %v", err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

func redact(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// String implements fmt.Stringer.
func (b Backend) String() string { return string(b) }

var _ fmt.Stringer = Backend("")
