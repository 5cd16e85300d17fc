package idemoutbox

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/goovo/idem/idembackend"
)

// KindStats are River's jobs of one kind, as an operator sees them: the
// effects that wait, and those River gave up on.
type KindStats struct {
	Kind string `json:"kind"`
	// Waiting counts the jobs waiting to run: available, scheduled,
	// pending, and retryable (which failed and run again).
	Waiting int64 `json:"waiting"`
	// Running counts the jobs a worker is running, apart from Waiting.
	Running int64 `json:"running"`
	// Retrying, the retryable jobs, are among Waiting.
	Retrying int64 `json:"retrying"`
	// Failed counts the jobs River gave up on (discarded: out of attempts,
	// or cancelled), whose effect did not happen.
	Failed    int64 `json:"failed"`
	Completed int64 `json:"completed"`
	// OldestWaiting is how long ago the oldest waiting job was inserted
	// (0 when none waits): how late the effects run.
	OldestWaiting time.Duration `json:"oldestWaitingNanos"`
}

// Stats counts River's jobs in ex's database (dialect "postgres" or
// "sqlite3") by kind, oldest waiting first: what idemctl outbox shows and
// RegisterMetrics reports.
func Stats(ctx context.Context, ex idembackend.Executor, dialect string) ([]KindStats, error) {
	if dialect == "mysql" {
		return nil, ErrMySQL
	}
	age := `EXTRACT(EPOCH FROM now() - min(created_at))::float8`
	if dialect == "sqlite3" {
		age = `(julianday('now') - julianday(min(created_at))) * 86400`
	}
	rows, err := ex.QueryContext(ctx, `SELECT kind, state, count(*), `+age+` FROM river_job GROUP BY kind, state`)
	if err != nil {
		return nil, fmt.Errorf("idemoutbox: read River's jobs: %w", err)
	}
	defer rows.Close()
	byKind := map[string]*KindStats{}
	for rows.Next() {
		var (
			kind, state string
			n           int64
			seconds     sql.NullFloat64
		)
		if err := rows.Scan(&kind, &state, &n, &seconds); err != nil {
			return nil, fmt.Errorf("idemoutbox: read River's jobs: %w", err)
		}
		k := byKind[kind]
		if k == nil {
			k = &KindStats{Kind: kind}
			byKind[kind] = k
		}
		switch state {
		case "completed":
			k.Completed += n
		case "discarded", "cancelled":
			k.Failed += n
		case "running":
			k.Running += n
		default: // available, scheduled, pending, retryable
			k.Waiting += n
			k.OldestWaiting = max(k.OldestWaiting, time.Duration(seconds.Float64*float64(time.Second)))
			if state == "retryable" {
				k.Retrying += n
			}
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("idemoutbox: read River's jobs: %w", err)
	}
	out := make([]KindStats, 0, len(byKind))
	for _, k := range byKind {
		out = append(out, *k)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].OldestWaiting != out[j].OldestWaiting {
			return out[i].OldestWaiting > out[j].OldestWaiting
		}
		return out[i].Kind < out[j].Kind
	})
	return out, nil
}

// Metric names of RegisterMetrics' instruments, with the attribute kind
// (the job's). They count the shared database's jobs, so every process
// reports the same numbers: aggregate them over processes with max(),
// never sum().
const (
	// MetricJobsWaiting ("idem.outbox.waiting") is how many jobs wait to
	// run.
	MetricJobsWaiting = "idem.outbox.waiting"
	// MetricJobsRunning ("idem.outbox.running") is how many jobs a worker
	// runs.
	MetricJobsRunning = "idem.outbox.running"
	// MetricJobsFailed ("idem.outbox.failed") is how many jobs River gave
	// up on.
	MetricJobsFailed = "idem.outbox.failed"
	// MetricOldestWaiting ("idem.outbox.oldest_waiting", seconds) is the
	// age of the oldest waiting job.
	MetricOldestWaiting = "idem.outbox.oldest_waiting"
)

// RegisterMetrics reports the outbox's jobs on mp, read with Stats at
// each collection: how many effects wait, how old the oldest is, how many
// failed for good.
func RegisterMetrics(mp metric.MeterProvider, ex idembackend.Executor, dialect string) error {
	m := mp.Meter("github.com/goovo/idem/idemoutbox")
	waiting, err := m.Int64ObservableGauge(MetricJobsWaiting, metric.WithDescription("River jobs waiting to run (available, scheduled, pending, retryable); the same in every process: aggregate with max()"))
	if err != nil {
		return err
	}
	running, err := m.Int64ObservableGauge(MetricJobsRunning, metric.WithDescription("River jobs a worker runs; the same in every process: aggregate with max()"))
	if err != nil {
		return err
	}
	failed, err := m.Int64ObservableGauge(MetricJobsFailed, metric.WithDescription("River jobs given up on (discarded, cancelled): effects that did not happen"))
	if err != nil {
		return err
	}
	oldest, err := m.Float64ObservableGauge(MetricOldestWaiting, metric.WithUnit("s"), metric.WithDescription("age of the oldest River job waiting to run"))
	if err != nil {
		return err
	}
	_, err = m.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		stats, err := Stats(ctx, ex, dialect)
		if err != nil {
			return err
		}
		for _, k := range stats {
			kind := metric.WithAttributes(attribute.String("kind", k.Kind))
			o.ObserveInt64(waiting, k.Waiting, kind)
			o.ObserveInt64(running, k.Running, kind)
			o.ObserveInt64(failed, k.Failed, kind)
			o.ObserveFloat64(oldest, k.OldestWaiting.Seconds(), kind)
		}
		return nil
	}, waiting, running, failed, oldest)
	return err
}
