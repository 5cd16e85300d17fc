package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/goovo/idem/internal/testkit"
	"github.com/goovo/idem/internal/testkit/pgcluster"
	"github.com/goovo/idem/internal/testkit/proctest"
)

// A server started while its PostgreSQL is down, or full ("sorry, too many
// clients already"), waits for it (-db-connect-timeout) instead of exiting,
// and serves once the database lets it in. A database that does not exist
// is not waited for. Each case runs real processes against a private
// cluster that the test starts late, or fills.
func TestServerWaitsForTheDatabaseAtStart(t *testing.T) {
	// PostgreSQL only: the test starts, stops and fills a private cluster
	// of its own (pgcluster); MariaDB has no such kit here, and the shared
	// server cannot be stopped. The wait itself (idemdb.WaitReady) is the
	// same code on every database.
	bin := proctest.Build(t, ".")
	// Bounds the cluster's start and the test's own connections (the
	// servers wait up to their -db-connect-timeout of 2m); counted from
	// after the build, which alone can take minutes on a loaded machine.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// Superuser slots count like the others here, so that the test's own
	// connections (as postgres, like the server's) fill the cluster.
	c, err := pgcluster.Init(ctx, pgcluster.Options{Settings: map[string]string{
		"max_connections": "6", "superuser_reserved_connections": "0",
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Remove(); err != nil {
			t.Error(err)
		}
	})
	env := []string{"DATABASE_URL=" + c.URL("postgres")}
	args := []string{"-db-connect-timeout", "2m", "-sweep-every", "0", "-materialize-every", "0"}

	// waitsFor starts a server and checks that it waits: it logged why,
	// tried again (a second such line), and has not exited. Polled: a
	// loaded machine may take longer than any fixed delay to start it.
	waitsFor := func(t *testing.T, why string) (*proctest.Process, string) {
		t.Helper()
		addr := proctest.FreeAddr(t)
		p := proctest.Start(t, bin, env, append([]string{"-addr", addr}, args...))
		for deadline := time.Now().Add(testkit.WaitBound); ; time.Sleep(50 * time.Millisecond) {
			out := p.Output()
			if strings.Count(out, "database unavailable; waiting for it") >= 2 && strings.Contains(out, why) {
				break
			}
			if p.Exited() {
				t.Fatalf("the server exited instead of waiting for the database: %v\n%s", p.Wait(), p.Output())
			}
			if time.Now().After(deadline) {
				t.Fatalf("the server's log does not say it waits because of %q:\n%s", why, out)
			}
		}
		if p.Exited() {
			t.Fatalf("the server exited instead of waiting for the database: %v\n%s", p.Wait(), p.Output())
		}
		return p, addr
	}
	serves := func(t *testing.T, p *proctest.Process, addr, key string) {
		t.Helper()
		p.WaitListening(t, addr, testkit.WaitBound)
		s := &serverProcess{Process: p, url: "http://" + addr + "/query"}
		if id := s.newOrder(t, "acme", key); id == "" {
			t.Fatalf("no order created:\n%s", p.Output())
		}
		p.Kill(t)
	}

	t.Run("down", func(t *testing.T) {
		p, addr := waitsFor(t, "connection refused")
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		serves(t, p, addr, "order-down")
	})

	t.Run("full", func(t *testing.T) {
		// The killed server's sessions take a moment to end: fill the
		// cluster once they have, or the slots they free would let the
		// next server in.
		first := connect(t, ctx, c.URL("postgres"))
		held := []*pgx.Conn{first}
		// Given back however the test ends.
		t.Cleanup(func() {
			for _, conn := range held {
				conn.Close(context.Background())
			}
		})
		testkit.Eventually(t, func() bool {
			var others int
			err := first.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()`).Scan(&others)
			if err != nil {
				t.Fatal(err)
			}
			return others == 0
		}, "the killed server's sessions ended")
		for deadline := time.Now().Add(testkit.WaitBound); ; {
			conn, err := pgx.Connect(ctx, c.URL("postgres"))
			if err != nil && strings.Contains(err.Error(), "too many clients") {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, conn)
			if time.Now().After(deadline) {
				t.Fatalf("the cluster accepts more than %d connections", len(held))
			}
		}
		p, addr := waitsFor(t, "too many clients")
		for _, conn := range held {
			conn.Close(ctx)
		}
		held = nil
		serves(t, p, addr, "order-full")
	})

	t.Run("no such database", func(t *testing.T) {
		p := proctest.Start(t, bin, []string{"DATABASE_URL=" + c.URL("nosuchdb")}, append([]string{"-addr", proctest.FreeAddr(t)}, args...))
		select {
		case <-p.Done():
		case <-time.After(testkit.WaitBound):
			t.Fatalf("the server waits for a database that does not exist:\n%s", p.Output())
		}
		if p.Wait() == nil || !strings.Contains(p.Output(), `database "nosuchdb" does not exist`) {
			t.Fatalf("exit %v, output:\n%s", p.Wait(), p.Output())
		}
	})
}

func connect(t *testing.T, ctx context.Context, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	return conn
}
