package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/goovo/idem/graph"
	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/testkit"
	"github.com/goovo/idem/internal/testkit/proctest"
)

// The outbox's crash: a server commits a payment, whose receipt job River
// has started to work (the mailer is slow), and is killed with SIGKILL
// before the mailer recorded it. Restarted (with the same -river-id), the
// server's River takes the job for stuck past -river-rescue-after and runs
// it again: the receipt is delivered, once. On MariaDB the receipt is a
// row of the receipt table, locked by the worker that delivers it: the
// kill ends the worker's connection, which frees the row, and the
// restarted server's worker delivers it.
func TestReceiptIsDeliveredAfterAKillBetweenCommitAndDelivery(t *testing.T) {
	bin := proctest.Build(t, ".")
	for _, b := range []idemtest.Kind{idemtest.SQLite, idemtest.Postgres, idemtest.MariaDB} {
		t.Run(string(b), func(t *testing.T) {
			t.Parallel()
			db := idemtest.Open(t, b)
			env, args := serverDatabase(db)
			args = append(args, onRiver(b, "-river-id", "server-1", "-river-poll-interval", "50ms", "-river-rescue-after", "2s")...)
			// The mailer never answers in time: the kill falls between the
			// payment's commit and the receipt's delivery.
			victim := startServer(t, bin, env, append(args, "-mailer-latency", "1h"))
			order := victim.newOrder(t, "acme", "order-1")
			if r := victim.pay("acme", "pay-1", order); len(r.Errors) > 0 || !strings.Contains(r.body, `"paid":true`) {
				t.Fatalf("payment: %s", r.body)
			}
			waitJobRunning(t, db, b)
			// On the outbox's own queue, apart from the counter's fold.
			var queue string
			if b != idemtest.MariaDB {
				if err := db.Driver.DB().QueryRowContext(context.Background(), `SELECT queue FROM river_job WHERE kind = 'send_receipt'`).Scan(&queue); err != nil || queue != "outbox" {
					t.Fatalf("the receipt's queue: %q %v, want outbox", queue, err)
				}
			}
			if got := receipts(t, victim, order); len(got) != 0 {
				t.Fatalf("receipts before the kill: %+v", got)
			}
			victim.Kill(t)

			restarted := startServer(t, bin, env, args)
			var got []receipt
			testkit.Eventually(t, func() bool {
				got = receipts(t, restarted, order)
				return len(got) > 0
			}, "the receipt delivered after the restart")
			if len(got) != 1 || got[0].Requests != 1 {
				t.Fatalf("receipts %+v, want one, requested once", got)
			}
			// And no second one later: the job is done.
			waitJobsDone(t, db, b)
			if again := receipts(t, restarted, order); len(again) != 1 || again[0].Requests != 1 {
				t.Fatalf("receipts later %+v, want the one", again)
			}
		})
	}
}

type receipt struct {
	ID, PaymentID string
	Requests      int
}

// receipts returns the mailer's receipts of an order, asked through the
// server.
func receipts(t *testing.T, p *serverProcess, order string) []receipt {
	t.Helper()
	r, err := p.do("acme", `query($o: ID!) { receipts(orderID: $o) { id paymentID requests } }`, map[string]any{"o": order})
	if err != nil || len(r.Errors) > 0 {
		t.Fatalf("receipts: %v %v", err, r)
	}
	var d struct{ Receipts []receipt }
	if err := json.Unmarshal(r.Data, &d); err != nil {
		t.Fatal(err)
	}
	return d.Receipts
}

// onRiver returns flags on River's backends, none on MariaDB, where River
// does not run and the server refuses River's flags.
func onRiver(b idemtest.Kind, flags ...string) []string {
	if b == idemtest.MariaDB {
		return nil
	}
	return flags
}

// waitJobRunning waits until a receipt job is being worked: on MariaDB,
// until the receipt's row is pending and locked by the worker delivering
// it.
func waitJobRunning(t *testing.T, db *idemtest.DB, b idemtest.Kind) {
	t.Helper()
	if b == idemtest.MariaDB {
		testkit.Eventually(t, func() bool {
			return countReceiptRows(t, db, false) == 1 && countReceiptRows(t, db, true) == 0
		}, "the receipt's row held by a worker")
		return
	}
	testkit.Eventually(t, func() bool { return countJobs(t, db, "running") == 1 }, "the receipt job running")
}

// waitJobsDone waits until no receipt job is left to work.
func waitJobsDone(t *testing.T, db *idemtest.DB, b idemtest.Kind) {
	t.Helper()
	if b == idemtest.MariaDB {
		testkit.Eventually(t, func() bool { return countReceiptRows(t, db, false) == 0 }, "the receipt rows delivered")
		return
	}
	testkit.Eventually(t, func() bool { return countJobs(t, db, "completed") == countJobs(t, db, "") }, "the receipt jobs completed")
}

// countReceiptRows counts the pending rows of the receipt table
// (MariaDB): all of them, or with unlocked only those no worker holds.
func countReceiptRows(t *testing.T, db *idemtest.DB, unlocked bool) int {
	t.Helper()
	ctx := context.Background()
	tx, err := db.Driver.DB().BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback() //nolint:errcheck // read only
	q := `SELECT id FROM ` + graph.ReceiptTable + ` WHERE delivered_at IS NULL`
	if unlocked {
		q += ` FOR UPDATE SKIP LOCKED`
	}
	rows, err := tx.QueryContext(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		n++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}

// countJobs counts the receipt jobs in state ("": all).
func countJobs(t *testing.T, db *idemtest.DB, state string) int {
	t.Helper()
	q := `SELECT count(*) FROM river_job WHERE kind = 'send_receipt'`
	if state != "" {
		q += fmt.Sprintf(" AND state = '%s'", state)
	}
	var n int
	if err := db.Driver.DB().QueryRowContext(context.Background(), q).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
