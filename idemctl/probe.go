package idemctl

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/goovo/idem/internal/store"
)

// CheckClaimTables asks every record table a question that reads no row:
// its claims whose lease ended before 1970, through the partial index on
// pending claims that the recoverer uses. It returns nil when each table
// answers, and otherwise an error naming the first table that did not
// (missing, renamed, locked past ctx, the database down). It is the claim
// tables' readiness check (idemhttp.ReadinessCheck).
func (a *Admin) CheckClaimTables(ctx context.Context) error {
	for _, recs := range a.cfg.Backend.RecordTables() {
		if _, err := a.store.PurgeAbandoned(ctx, store.AbandonedBatch{Table: store.TableOf(recs), LeaseEndedBefore: time.Unix(0, 0), DryRun: true}); err != nil {
			return fmt.Errorf("idem: record table %s: %w", recs.Table, err)
		}
	}
	return nil
}

// MetricClaimsPastLease ("idem.claims.past_lease") is the gauge
// RegisterMetrics adds: per record table (attribute idem.table), the
// pending claims whose lease has ended, which no attempt is running (its
// process died, or it released the claim after a retryable error) and
// whose client has not come back yet. A few for a moment is normal; a
// number that stays up means the recoverer is off, failing or behind
// (docs/operations.md, "Alerts"). Every process reports the same count
// from the shared database: aggregate it over processes with max(), not
// sum().
const MetricClaimsPastLease = "idem.claims.past_lease"

// MetricSweepPromised ("idem.sweep.promised") is the gauge RegisterMetrics
// adds beside MetricClaimsPastLease: per record table (attribute
// idem.table), how many records this Admin's last sweep (RunSweeper, Sweep)
// kept past its retention because their answers promised them for longer
// (TableSweep.Promised): a server answered with a longer retention than
// the sweeper's. 0 before the first sweep and when the retentions agree;
// it differs between processes started with different retentions:
// aggregate with max() (docs/operations.md, "IdemRetentionMismatch").
const MetricSweepPromised = "idem.sweep.promised"

// RegisterMetrics adds the gauges MetricClaimsPastLease and
// MetricSweepPromised to mp. The first is sampled at each collection (a
// Prometheus scrape) with one count per record table through the partial
// index on pending claims, whose cost follows the pending claims, not the
// table; the second reports this Admin's last sweep and reads nothing.
func (a *Admin) RegisterMetrics(mp metric.MeterProvider) error {
	m := mp.Meter("github.com/goovo/idem/idemctl")
	g, err := m.Int64ObservableGauge(MetricClaimsPastLease, metric.WithUnit("{claim}"),
		metric.WithDescription("Pending idempotency claims whose lease has ended, per record table; the same in every process: aggregate with max()."))
	if err != nil {
		return err
	}
	promised, err := m.Int64ObservableGauge(MetricSweepPromised, metric.WithUnit("{record}"),
		metric.WithDescription("Records the last sweep of this process kept past its retention because their answers promised them for longer, per record table: a retention mismatch; aggregate with max()."))
	if err != nil {
		return err
	}
	tables := a.cfg.Backend.RecordTables()
	attrs := make([]metric.ObserveOption, len(tables))
	for i, recs := range tables {
		attrs[i] = metric.WithAttributes(attribute.String("idem.table", recs.Table))
	}
	_, err = m.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		reading, err := a.store.Now(ctx)
		if err != nil {
			return err
		}
		for i, recs := range tables {
			n, err := a.store.PurgeAbandoned(ctx, store.AbandonedBatch{Table: store.TableOf(recs), LeaseEndedBefore: reading.Now(), DryRun: true})
			if err != nil {
				return err
			}
			o.ObserveInt64(g, int64(n), attrs[i])
		}
		a.mu.Lock()
		defer a.mu.Unlock()
		for i, recs := range tables {
			o.ObserveInt64(promised, int64(a.promised[recs.Table]), attrs[i])
		}
		return nil
	}, g, promised)
	if err != nil {
		return err
	}
	return a.registerReplication(m)
}
