package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/stdlib"

	"github.com/goovo/idem/idemdb"
)

// registerPostgres makes pgx answer to the database/sql name "postgres",
// which Atlas's URL opener (sqlclient) asks for. Through that opener the
// Atlas driver is bound to the schema of the URL's search_path, so that
// replaying and normalizing stay inside the throwaway schema instead of
// requiring the whole database to be empty.
var registerPostgres = sync.OnceFunc(func() {
	if !slices.Contains(sql.Drivers(), "postgres") {
		sql.Register("postgres", stdlib.GetDefaultDriver())
	}
})

// devDB is a fresh, empty PostgreSQL schema or MySQL database for one
// command, dropped by close.
type devDB struct {
	// url opens it through Atlas: on PostgreSQL the base URL with
	// search_path set to the schema, on MySQL the base URL with the
	// database in its path.
	url  string
	drop string // the statement that drops it
	// admin is a connection pool on the dev server, outside the
	// throwaway schema or database.
	admin *sql.DB
}

// devName is a new throwaway schema's or database's name.
func devName() string {
	suffix := make([]byte, 6)
	_, _ = rand.Read(suffix)
	return "idem_migrate_dev_" + hex.EncodeToString(suffix)
}

// pingDev checks that the dev server answers, with a message that says
// what to do when it does not.
func pingDev(ctx context.Context, admin *sql.DB, base, what string) error {
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := admin.PingContext(pctx); err != nil {
		admin.Close()
		return fmt.Errorf("dev database %s is unreachable (the diff and check commands need a %s server to replay the migrations on; set -dev-url, or start it): %w", redact(base), what, err)
	}
	return nil
}

func openDevPostgres(ctx context.Context, base string) (*devDB, error) {
	if !idemdb.IsPostgres(base) {
		return nil, fmt.Errorf("dev database %q: want a postgres:// URL", redact(base))
	}
	registerPostgres()
	admin, err := sql.Open("pgx", base)
	if err != nil {
		return nil, err
	}
	if err := pingDev(ctx, admin, base, "PostgreSQL (TEST_DATABASE_URL)"); err != nil {
		return nil, err
	}
	u, err := url.Parse(base)
	if err != nil {
		admin.Close()
		return nil, err
	}
	name := devName()
	if _, err := admin.ExecContext(ctx, "CREATE SCHEMA "+name); err != nil {
		admin.Close()
		return nil, fmt.Errorf("dev database: create schema: %w", err)
	}
	q := u.Query()
	q.Set("search_path", name)
	u.RawQuery = q.Encode()
	return &devDB{url: u.String(), drop: "DROP SCHEMA IF EXISTS " + name + " CASCADE", admin: admin}, nil
}

// openDevMySQL creates a database on the server of base (a mysql:// URL;
// its own database is not touched). Its character set is the server's
// default: ent's tables name theirs (utf8mb4, utf8mb4_bin), and the
// migrations must too, whatever the database they run on defaults to.
func openDevMySQL(ctx context.Context, base string) (*devDB, error) {
	source, err := idemdb.MySQLDSN(base)
	if err != nil {
		return nil, fmt.Errorf("dev database %q: want a mysql://user:password@host:port/database URL", redact(base))
	}
	admin, err := sql.Open("mysql", source)
	if err != nil {
		return nil, err
	}
	if err := pingDev(ctx, admin, base, "MySQL or MariaDB (TEST_MYSQL_URL)"); err != nil {
		return nil, err
	}
	u, err := url.Parse(base)
	if err != nil {
		admin.Close()
		return nil, err
	}
	name := devName()
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		admin.Close()
		return nil, fmt.Errorf("dev database: create database: %w", err)
	}
	u.Path = "/" + name
	return &devDB{url: u.String(), drop: "DROP DATABASE IF EXISTS " + name, admin: admin}, nil
}

func (d *devDB) close() error {
	defer d.admin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := d.admin.ExecContext(ctx, d.drop); err != nil {
		return fmt.Errorf("dev database: %s: %w", d.drop, err)
	}
	return nil
}

func redact(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}
