package main

import (
	"context"
	"fmt"
	"io/fs"
	"net/url"

	atlas "ariga.io/atlas/sql/schema"
	"entgo.io/ent/dialect"
	"github.com/go-sql-driver/mysql"

	"github.com/goovo/idem/ent/migrate/migrations"
	"github.com/goovo/idem/ent/migrate/mysqlmigrations"
	"github.com/goovo/idem/idemdb"
)

// flavor is everything migrate does differently on one database: where
// its migrations are, which dev database replays them, and the SQL of the
// revisions table. The two flavors are postgresFlavor and mysqlFlavor.
type flavor struct {
	// name is the -dialect flag's value.
	name string
	// entDialect is ent's dialect the migrations are generated for.
	entDialect string
	// dir is the committed migration directory, relative to the
	// repository root; embedded is the same, compiled into the binary.
	dir      string
	embedded fs.FS
	// devEnv names the environment variable of the default dev server;
	// defaultDev is used when it is unset.
	devEnv, defaultDev string
	// openDev creates a throwaway schema (PostgreSQL) or database (MySQL)
	// on the dev server at base.
	openDev func(ctx context.Context, base string) (*devDB, error)
	// openDriver opens Atlas's driver on a connection to the target.
	openDriver func(conn atlas.ExecQuerier) (driver, error)
	// currentSchema is the query of the target's schema (PostgreSQL) or
	// database (MySQL): where up and status work.
	currentSchema string
	// transactional is whether a migration file can run in one
	// transaction: not on MySQL, whose DDL commits by itself.
	transactional bool
	// river is whether the migrations hold River's tables (PostgreSQL
	// only: River has no MySQL driver).
	river bool
	// sql is the revisions table's SQL.
	sql revisionSQL
}

// DefaultDevURL is the PostgreSQL server the developer's commands borrow a
// throwaway schema from, when neither -dev-url nor TEST_DATABASE_URL is set.
const DefaultDevURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// DefaultMySQLDevURL is the MySQL or MariaDB server the developer's
// commands borrow a throwaway database from with -dialect mysql, when
// neither -dev-url nor TEST_MYSQL_URL is set.
const DefaultMySQLDevURL = "mysql://root@127.0.0.1:3306/test"

var postgresFlavor = &flavor{
	name:          "postgres",
	entDialect:    dialect.Postgres,
	dir:           DefaultDir,
	embedded:      migrations.FS,
	devEnv:        "TEST_DATABASE_URL",
	defaultDev:    DefaultDevURL,
	openDev:       openDevPostgres,
	openDriver:    openPostgresDriver,
	currentSchema: "SELECT current_schema()",
	transactional: true,
	river:         true,
	sql:           postgresRevisionSQL,
}

var mysqlFlavor = &flavor{
	name:          "mysql",
	entDialect:    dialect.MySQL,
	dir:           DefaultMySQLDir,
	embedded:      mysqlmigrations.FS,
	devEnv:        "TEST_MYSQL_URL",
	defaultDev:    DefaultMySQLDevURL,
	openDev:       openDevMySQL,
	openDriver:    openMySQLDriver,
	currentSchema: "SELECT DATABASE()",
	sql:           mysqlRevisionSQL,
}

// flavorNamed returns the flavor of the -dialect flag's value.
func flavorNamed(name string) (*flavor, error) {
	switch name {
	case "postgres", "postgresql":
		return postgresFlavor, nil
	case "mysql", "mariadb":
		return mysqlFlavor, nil
	}
	return nil, fmt.Errorf("-dialect %q: want postgres or mysql", name)
}

// flavorOf returns the flavor of an operator's DATABASE_URL.
func flavorOf(dsn string) (*flavor, error) {
	switch {
	case dsn == "":
		return nil, fmt.Errorf("DATABASE_URL is not set: set it to the postgres:// or mysql:// URL of the database to migrate")
	case idemdb.IsPostgres(dsn):
		return postgresFlavor, nil
	case idemdb.IsMySQL(dsn):
		return mysqlFlavor, nil
	}
	return nil, fmt.Errorf("DATABASE_URL must be a postgres:// (or postgresql://) or a mysql:// URL: migrate manages PostgreSQL and MySQL " +
		"(the server's embedded SQLite database is created by the server itself)")
}

// flag is the -dialect flag that selects the flavor in the commands
// messages suggest: none for PostgreSQL, the default.
func (f *flavor) flag() string {
	if f == postgresFlavor {
		return ""
	}
	return " -dialect " + f.name
}

// embeddedName names the migrations compiled into the binary in messages.
func (f *flavor) embeddedName() string { return "embedded " + f.dir }

// devURL is the dev server of the developer's commands when -dev-url is
// not given: the flavor's environment variable, or its default. MySQL's
// may be a go-sql-driver data source (user:password@tcp(host:port)/db),
// as TEST_MYSQL_URL often is; it becomes a mysql:// URL.
func (f *flavor) devURL(getenv func(string) string) string {
	dsn := getenv(f.devEnv)
	if dsn == "" {
		return f.defaultDev
	}
	if f != mysqlFlavor || idemdb.IsMySQL(dsn) {
		return dsn
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return dsn // refused, with its text, by openDevMySQL
	}
	u := url.URL{Scheme: "mysql", Host: cfg.Addr, Path: "/" + cfg.DBName}
	if cfg.Passwd != "" {
		u.User = url.UserPassword(cfg.User, cfg.Passwd)
	} else if cfg.User != "" {
		u.User = url.User(cfg.User)
	}
	return u.String()
}
