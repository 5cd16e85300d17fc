package idemdb_test

import (
	"path/filepath"
	"testing"
	"time"

	entsql "entgo.io/ent/dialect/sql"

	"github.com/goovo/idem/idemdb"
	"github.com/goovo/idem/idemdb/pgxdriver"
)

// OpenPool opens PostgreSQL on pgx, its pool bounded by Pool, else by the
// URL's settings, else by the defaults; SQLite stays on database/sql. The
// pool connects lazily: nothing here needs a server.
func TestOpenPoolOnPgx(t *testing.T) {
	for _, c := range []struct {
		query    string
		pool     idemdb.Pool
		maxConns int32
		idle     time.Duration
	}{
		{"", idemdb.Pool{}, idemdb.DefaultMaxConns, 5 * time.Minute},
		{"&pool_max_conns=3&pool_max_conn_idle_time=1m", idemdb.Pool{}, 3, time.Minute},
		{"&pool_max_conns=3", idemdb.Pool{MaxConns: 7, MaxIdleTime: time.Second}, 7, time.Second},
	} {
		drv, err := idemdb.OpenPool("postgres://app@127.0.0.1:1/app?sslmode=disable"+c.query, c.pool)
		if err != nil {
			t.Fatal(err)
		}
		pgx, ok := drv.(*pgxdriver.Driver)
		if !ok {
			t.Fatalf("%q: %T, want the pgx driver", c.query, drv)
		}
		cfg := pgx.Pool().Config()
		if cfg.MaxConns != c.maxConns || cfg.MaxConnIdleTime != c.idle {
			t.Errorf("%q %+v: %d connections, idle %v; want %d, %v", c.query, c.pool, cfg.MaxConns, cfg.MaxConnIdleTime, c.maxConns, c.idle)
		}
		drv.Close()
	}
	drv, err := idemdb.Open(filepath.Join(t.TempDir(), "app.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer drv.Close()
	if _, ok := drv.(*entsql.Driver); !ok {
		t.Errorf("SQLite opened as %T, want database/sql", drv)
	}
}
