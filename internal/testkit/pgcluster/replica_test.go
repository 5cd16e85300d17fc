package pgcluster_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/goovo/idem/internal/testkit"
	"github.com/goovo/idem/internal/testkit/pgcluster"
)

// What a failover keeps, by replication setting. The standby falls behind
// (the primary's WAL sender stopped), a row is committed, the primary is
// killed and the standby promoted: with a synchronous standby the commit
// never came back to the client (it waited for the standby) and nothing
// acknowledged is lost; with an asynchronous one it was acknowledged, and
// the promoted standby does not have it. A client on the pair's two-host
// URL reaches the promoted standby.
func TestPairFailover(t *testing.T) {
	for _, mode := range []pgcluster.Replication{pgcluster.Synchronous, pgcluster.Asynchronous} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			p, err := pgcluster.NewPair(ctx, mode, pgcluster.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := p.Remove(); err != nil {
					t.Error(err)
				}
			})
			conn := connect(t, ctx, p.URL("postgres"))
			if _, err := conn.Exec(ctx, "CREATE TABLE kept (n int); INSERT INTO kept VALUES (1)"); err != nil {
				t.Fatal(err)
			}
			resume, err := p.HoldWAL(ctx)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = resume() })
			committed := make(chan error, 1)
			go func() {
				_, err := conn.Exec(ctx, "INSERT INTO kept VALUES (2)")
				committed <- err
			}()
			if mode == pgcluster.Synchronous {
				// The commit waits for the standby: its backend says so.
				watch := connect(t, ctx, p.Primary.URL("postgres"))
				testkit.Eventually(t, func() bool {
					var n int
					err := watch.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'`).Scan(&n)
					return err == nil && n == 1
				}, "the commit waiting for the synchronous standby")
			} else if err := <-committed; err != nil {
				t.Fatalf("asynchronous commit: %v", err)
			}
			took, err := p.Fail(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if mode == pgcluster.Synchronous {
				if err := <-committed; err == nil {
					t.Fatal("a commit waiting for the standby was acknowledged by a killed primary")
				}
			}
			after := connect(t, ctx, p.URL("postgres"))
			var ns []int32
			rows, _ := after.Query(ctx, "SELECT n FROM kept ORDER BY n")
			ns, err = pgx.CollectRows(rows, pgx.RowTo[int32])
			if err != nil {
				t.Fatal(err)
			}
			// Row 1 was committed before the standby fell behind; row 2
			// after: acknowledged only asynchronously, and lost then.
			if len(ns) != 1 || ns[0] != 1 {
				t.Fatalf("after the failover: %v, want [1]", ns)
			}
			var ro string
			if err := after.QueryRow(ctx, "SHOW transaction_read_only").Scan(&ro); err != nil || ro != "off" {
				t.Fatalf("the two-host URL reached a read-only server (%q, %v)", ro, err)
			}
			if err := conn.Ping(ctx); err == nil || errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("a session of the killed primary still answers: %v", err)
			}
			t.Logf("%s: promoted in %v; the commit made while the standby lagged: %s", mode, took.Round(time.Millisecond),
				map[pgcluster.Replication]string{pgcluster.Synchronous: "never acknowledged", pgcluster.Asynchronous: "acknowledged, and lost"}[mode])
		})
	}
}
