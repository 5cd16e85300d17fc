package idemdb

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql" // registers "mysql"
)

// IsMySQL reports whether dsn is a MySQL or MariaDB URL (mysql://).
func IsMySQL(dsn string) bool { return strings.HasPrefix(dsn, "mysql://") }

// MySQLDSN returns the go-sql-driver/mysql data source of the URL
// mysql://user:password@host:port/database?param=value, with the
// settings the claim protocol needs (where the URL does not set them):
//
//   - parseTime=true and loc=UTC: DATETIME(6) columns read back as
//     time.Time, and every time is written and read as UTC (the mixin's
//     columns hold no time zone);
//   - clientFoundRows=true: an UPDATE reports the rows it matched, not
//     only those it changed, so that a fenced renewal that writes the
//     lease it already had still reports that the attempt holds the claim;
//   - charset utf8mb4 with a binary collation, as ent's tables have: keys
//     and tenants compare byte for byte, as on PostgreSQL;
//   - sql_mode with STRICT_ALL_TABLES added: a value the column cannot
//     hold (bytes that are not UTF-8) is an error, never a warning and a
//     mangled value.
//
// Other parameters are go-sql-driver's (timeout, tls, …) or MySQL system
// variables, as that driver reads them.
func MySQLDSN(rawURL string) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme != "mysql" {
		return "", errors.New("idemdb: MySQL URL: want mysql://user:password@host:port/database")
	}
	cfg := mysql.NewConfig()
	if u.User != nil {
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
	}
	cfg.Net, cfg.Addr = "tcp", u.Host
	if u.Port() == "" {
		cfg.Addr = u.Hostname() + ":3306"
	}
	cfg.DBName = strings.TrimPrefix(u.Path, "/")
	if cfg.DBName == "" {
		return "", errors.New("idemdb: MySQL URL names no database (mysql://user:password@host:port/database)")
	}
	cfg.ParseTime, cfg.Loc, cfg.ClientFoundRows = true, time.UTC, true
	cfg.Collation = "utf8mb4_bin"
	cfg.Params = map[string]string{"sql_mode": "CONCAT(@@sql_mode, ',STRICT_ALL_TABLES')"}
	q := u.Query()
	for k := range q {
		cfg.Params[k] = q.Get(k)
	}
	// go-sql-driver's own parameters (parseTime, timeout, tls, …) are
	// read by its parser: the URL's query goes through it.
	base := cfg.FormatDSN()
	parsed, err := mysql.ParseDSN(base)
	if err != nil {
		return "", fmt.Errorf("idemdb: MySQL URL: %w", err)
	}
	return parsed.FormatDSN(), nil
}

// mysqlPermanent reports MySQL's connection errors that waiting does not
// fix: access denied (1045) and an unknown database (1049).
func mysqlPermanent(err error) bool {
	var my *mysql.MySQLError
	return errors.As(err, &my) && (my.Number == 1045 || my.Number == 1049)
}

// mysqlMigrationLock runs migrate under MySQL's named lock of the
// database (GET_LOCK), held by a connection of its own until migrate
// returns: MySQL's DDL commits by itself, so no transaction can hold the
// migration together; the named lock makes concurrent starts take turns.
// The lock ends with its connection, on a crash too.
func mysqlMigrationLock(ctx context.Context, drv Driver, migrate func(context.Context) error) error {
	conn, err := drv.DB().Conn(ctx)
	if err != nil {
		return fmt.Errorf("idemdb: migration lock: %w", err)
	}
	defer conn.Close()
	wait := 10 * time.Minute
	if d, ok := ctx.Deadline(); ok {
		wait = max(time.Until(d), time.Second)
	}
	var got any
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(CONCAT(?, DATABASE()), ?)", migrationLockKey, int(wait.Seconds())).Scan(&got); err != nil {
		return fmt.Errorf("idemdb: migration lock: %w", err)
	}
	if fmt.Sprint(got) != "1" {
		return fmt.Errorf("idemdb: migration lock: not granted within %v", wait)
	}
	defer func() {
		_, _ = conn.ExecContext(context.WithoutCancel(ctx), "DO RELEASE_LOCK(CONCAT(?, DATABASE()))", migrationLockKey)
	}()
	return migrate(ctx)
}
