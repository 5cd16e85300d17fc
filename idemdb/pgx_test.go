package idemdb_test

import (
	"testing"
	"time"

	"github.com/goovo/idem/idemdb"
)

// OpenPgx bounds the pool like Open unless the URL says otherwise, and
// refuses what is not a PostgreSQL URL. The pool connects lazily: nothing
// here needs a server.
func TestOpenPgxPoolSettings(t *testing.T) {
	for _, c := range []struct {
		query    string
		maxConns int32
		idle     time.Duration
	}{
		{"", idemdb.DefaultMaxConns, 5 * time.Minute},
		{"&pool_max_conns=3&pool_max_conn_idle_time=1m", 3, time.Minute},
	} {
		drv, err := idemdb.OpenPgx("postgres://app@127.0.0.1:1/app?sslmode=disable" + c.query)
		if err != nil {
			t.Fatal(err)
		}
		cfg := drv.Pool().Config()
		if cfg.MaxConns != c.maxConns || cfg.MaxConnIdleTime != c.idle {
			t.Errorf("%q: %d connections, idle %v; want %d, %v", c.query, cfg.MaxConns, cfg.MaxConnIdleTime, c.maxConns, c.idle)
		}
		drv.Close()
	}
	if _, err := idemdb.OpenPgx("app.db"); err == nil {
		t.Error("OpenPgx opened a SQLite path")
	}
}
