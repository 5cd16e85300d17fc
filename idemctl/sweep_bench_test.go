package idemctl_test

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/goovo/idem"
	"github.com/goovo/idem/idemctl"
	"github.com/goovo/idem/idemtest"
)

// The cost of a sweep that honours a mutation's retention, side by side
// with one that archives by the table's alone, on PostgreSQL: N records
// (SWEEP_BENCH_ROWS, default 100,000) of approveShipment (24 h) completed
// 2 to 22 hours ago share idempotency_records with approveShipmentBrief
// (1 h), whose records were all archived already: nothing is due, the
// steady state of a sweeper that runs every minute. The per-mutation pass
// reads the band between the table's cutoff and the mutation's through
// the partial index on the completion time and filters the fingerprints
// (no index holds them), so its cost follows the rows of the table's other
// mutations in that band, on the Admin's first sweep; later sweeps read
// only the records completed since the previous one (less a margin).
//
//	go test -run '^$' -bench SweepNothingDue -benchtime 20x ./idemctl
func BenchmarkSweepNothingDue(b *testing.B) {
	n := 100_000
	if v, err := strconv.Atoi(os.Getenv("SWEEP_BENCH_ROWS")); err == nil && v > 0 {
		n = v
	}
	be := newBench(b, idemtest.Postgres)
	db := be.DB.Driver.DB()
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, `
INSERT INTO idempotency_records (tenant_id, idempotency_key, idempotency_status, idempotency_fingerprint, idempotency_response,
	idempotency_attempt, idempotency_lease_expires_at, idempotency_claimed_at, idempotency_completed_at)
SELECT 'org-' || (i % 50), 'long-' || i, 'succeeded', 'v1:Mutation.approveShipment:0123456789abcdef:0123456789abcdef',
	convert_to('{"v":1,"data":{"approveShipment":{"id":"1","label":"attempt-1"}}}', 'UTF8'), 1,
	now() - interval '2 hours', now() - interval '2 hours' - (i % 72000) * interval '1 second',
	now() - interval '2 hours' - (i % 72000) * interval '1 second'
FROM generate_series(1, $1) AS i`, n); err != nil {
		b.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "ANALYZE idempotency_records"); err != nil {
		b.Fatal(err)
	}
	standalone, err := idem.New(idem.Config{Backend: be.Client.IdempotencyBackend(), Clock: be.Clock, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	first := map[string]time.Duration{}
	for _, c := range []struct {
		name  string
		admin *idemctl.Admin
	}{
		{"table-only", idemctl.New(standalone)},
		{"per-mutation", idemctl.New(be.Hook)},
	} {
		b.Run(c.name, func(b *testing.B) {
			sweep := func() {
				r, err := c.admin.Sweep(ctx, idemctl.SweepOptions{})
				if err != nil || r.Archived() != 0 {
					b.Fatalf("%+v %v", r, err)
				}
			}
			// The Admin's first sweep reads the whole band; the next ones
			// read from where the last one ended (less a margin).
			if first[c.name] == 0 {
				start := time.Now()
				sweep()
				first[c.name] = time.Since(start)
			}
			for b.Loop() {
				sweep()
			}
			b.ReportMetric(float64(first[c.name].Microseconds())/1000, "ms-first-sweep")
		})
	}
}
