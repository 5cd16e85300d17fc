package pgcluster_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/goovo/idem/internal/testkit/pgcluster"
)

// A private cluster starts on its own port with the settings asked for,
// survives a restart with its data, and PgBouncer in transaction mode
// passes queries through to it.
func TestClusterAndBouncer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := pgcluster.Init(ctx, pgcluster.Options{Settings: map[string]string{"max_connections": "20"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Remove(); err != nil {
			t.Error(err)
		}
	})
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	conn := connect(t, ctx, c.URL("postgres"))
	var max string
	if err := conn.QueryRow(ctx, "SHOW max_connections").Scan(&max); err != nil || max != "20" {
		t.Fatalf("max_connections %q (%v), want 20", max, err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE kept (n int); INSERT INTO kept VALUES (7)"); err != nil {
		t.Fatal(err)
	}

	if err := c.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	// The restart ended the session.
	if err := conn.Ping(ctx); err == nil {
		t.Error("a session survived the restart")
	}
	conn = connect(t, ctx, c.URL("postgres"))
	var n int
	if err := conn.QueryRow(ctx, "SELECT n FROM kept").Scan(&n); err != nil || n != 7 {
		t.Fatalf("after the restart: %d, %v", n, err)
	}

	b, err := pgcluster.StartBouncer(ctx, c, pgcluster.BouncerOptions{PoolSize: 1, Databases: map[string]string{"alias": "postgres"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Stop(); err != nil {
			t.Error(err)
		}
	})
	// Two clients share the bouncer's one server connection, which
	// transaction pooling hands from one to the other: a prepared
	// statement of pgx's default mode, made by the first on that
	// connection, collides with the second's.
	a := connect(t, ctx, b.URL("alias")+"&default_query_exec_mode=exec")
	d := connect(t, ctx, b.URL("alias")+"&default_query_exec_mode=exec")
	for _, cn := range []*pgx.Conn{a, d, a, d} {
		if err := cn.QueryRow(ctx, "SELECT n FROM kept WHERE n = $1", 7).Scan(&n); err != nil || n != 7 {
			t.Fatalf("through PgBouncer: %d, %v", n, err)
		}
	}
	p1 := connect(t, ctx, b.URL("alias"))
	p2 := connect(t, ctx, b.URL("alias"))
	err = p1.QueryRow(ctx, "SELECT n FROM kept WHERE n = $1", 7).Scan(&n)
	if err == nil {
		err = p2.QueryRow(ctx, "SELECT n FROM kept WHERE n = $1", 7).Scan(&n)
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "42P05" {
		t.Errorf("pgx's statement cache behind PgBouncer in transaction mode: %v, want 42P05 (prepared statement already exists)", err)
	}

	// PgBouncer runs with the sample's settings (ops/pgbouncer): its
	// admin console's SHOW CONFIG has each of them, but those the tests
	// set themselves (the addresses, files, authentication, pool size).
	sample, err := os.ReadFile("../../../ops/pgbouncer/pgbouncer.ini")
	if err != nil {
		t.Fatal(err)
	}
	admin := connect(t, ctx, b.URL("pgbouncer")+"&default_query_exec_mode=simple_protocol")
	rows, err := admin.Query(ctx, "SHOW CONFIG")
	if err != nil {
		t.Fatal(err)
	}
	config := map[string]string{}
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		config[fmt.Sprint(vals[0])] = fmt.Sprint(vals[1])
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	own := map[string]bool{"listen_addr": true, "listen_port": true, "auth_type": true, "auth_file": true, "default_pool_size": true}
	section, checked := "", 0
	for line := range strings.Lines(string(sample)) {
		l := strings.TrimSpace(line)
		switch {
		case l == "" || strings.HasPrefix(l, ";"):
		case strings.HasPrefix(l, "["):
			section = l
		case section == "[pgbouncer]":
			name, value, _ := strings.Cut(l, "=")
			name, value = strings.TrimSpace(name), strings.TrimSpace(value)
			if own[name] {
				continue
			}
			checked++
			if config[name] != value {
				t.Errorf("PgBouncer's %s is %q, the sample's %q", name, config[name], value)
			}
		}
	}
	if checked == 0 {
		t.Error("the sample sets nothing the tests run with")
	}
}

func connect(t *testing.T, ctx context.Context, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}
