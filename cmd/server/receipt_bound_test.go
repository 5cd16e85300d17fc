package main

import (
	"strings"
	"testing"
	"time"

	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/testkit/proctest"
)

// receiptBound is the contract's bound: after a crash between a payment's
// commit and its receipt's delivery, the receipt arrives within 30 s of
// the restart, on the server's default settings.
const receiptBound = 30 * time.Second

// The crash of TestReceiptIsDeliveredAfterAKillBetweenCommitAndDelivery,
// on the server's default River settings (no -river-id, so the restarted
// process is a new River client; the default -river-rescue-after): the
// receipt arrives within receiptBound of the restart. Issue 31 measured
// 82 s on PostgreSQL: River's rescuer, which runs every 30 s on the
// leader, takes a job for stuck only -river-rescue-after (then a minute)
// after it started. On MariaDB the receipt table's workers poll every
// second, and the victim's lock on the receipt's row ends with its
// connection.
func TestReceiptAfterACrashArrivesWithinTheBoundOnDefaults(t *testing.T) {
	bin := proctest.Build(t, ".")
	for _, b := range []idemtest.Kind{idemtest.SQLite, idemtest.Postgres, idemtest.MariaDB} {
		t.Run(string(b), func(t *testing.T) {
			t.Parallel()
			db := idemtest.Open(t, b)
			env, args := serverDatabase(db)
			// The victim's job runs until the kill (not timed out and
			// retried meanwhile); the restarted server runs on defaults.
			victim := startServer(t, bin, env, append(append(args, "-mailer-latency", "1h"), onRiver(b, "-river-rescue-after", "10m")...))
			order := victim.newOrder(t, "acme", "order-1")
			if r := victim.pay("acme", "pay-1", order); len(r.Errors) > 0 || !strings.Contains(r.body, `"paid":true`) {
				t.Fatalf("payment: %s", r.body)
			}
			waitJobRunning(t, db, b)
			victim.Kill(t)

			restarted := startServer(t, bin, env, args)
			since := time.Now()
			// Waits past the bound, to report how long delivery took.
			deadline := since.Add(3 * time.Minute)
			var got []receipt
			for len(got) == 0 && time.Now().Before(deadline) {
				got = receipts(t, restarted, order)
				if len(got) == 0 {
					time.Sleep(100 * time.Millisecond) // polling a condition, not asserting a duration
				}
			}
			took := time.Since(since)
			t.Logf("receipt delivered %.1fs after the restart", took.Seconds())
			if len(got) != 1 || got[0].Requests != 1 {
				t.Fatalf("receipts %+v, want one, requested once", got)
			}
			if took > receiptBound {
				t.Fatalf("the receipt arrived %.1fs after the restart, past the contract's %v", took.Seconds(), receiptBound)
			}
		})
	}
}
