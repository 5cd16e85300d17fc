package idemctl

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"strings"

	"entgo.io/ent/dialect"
	"go.opentelemetry.io/otel/metric"

	"github.com/goovo/idem/idembackend"
)

// Replication is what a PostgreSQL primary's settings promise about a
// failover: whether every commit it acknowledges is also on a standby, so
// that a promoted standby has every stored answer a client received.
// With asynchronous replication (or synchronous_commit below on), a
// standby promoted while it lagged lacks the last acknowledged commits:
// their keys run again on a retry and answer differently (another order
// id), and a provider charge made with such a key is kept by the provider
// while its payment row is gone (docs/replication.md).
type Replication struct {
	// SynchronousCommit is the session's synchronous_commit (on,
	// remote_apply, remote_write, local or off).
	SynchronousCommit string `json:"synchronousCommit"`
	// SynchronousStandbyNames is the primary's synchronous_standby_names
	// ("" when commits wait for no standby).
	SynchronousStandbyNames string `json:"synchronousStandbyNames"`
	// Standbys counts the standbys streaming from this server, and
	// SynchronousStandbys those among them a commit waits for (-1 when
	// the role may not see pg_stat_replication's sync_state).
	Standbys            int `json:"standbys"`
	SynchronousStandbys int `json:"synchronousStandbys"`
	// Synchronous: a commit acknowledged here is on a standby too (a
	// synchronous standby is named and synchronous_commit is on or
	// remote_apply). It cannot be seen from SQL when the storage itself
	// is replicated (RDS Multi-AZ instance, Aurora, Cloud SQL HA, Azure
	// zone-redundant HA): there Synchronous is false, and the warning
	// does not apply (docs/replication.md).
	Synchronous bool `json:"synchronous"`
	// Warning says what can be lost, "" when Synchronous.
	Warning string `json:"warning,omitempty"`
}

// CheckReplication reads the replication settings of the PostgreSQL
// database db, as its sessions see them. On other dialects it returns
// nil: SQLite has no standby, and nothing to say.
func CheckReplication(ctx context.Context, db idembackend.Executor, dialectName string) (*Replication, error) {
	if dialectName != dialect.Postgres {
		return nil, nil
	}
	rows, err := db.QueryContext(ctx, `SELECT current_setting('synchronous_commit'), current_setting('synchronous_standby_names'),
		(SELECT count(*) FROM pg_stat_replication),
		(SELECT CASE WHEN bool_or(sync_state IS NULL) THEN -1 ELSE count(*) FILTER (WHERE sync_state IN ('sync', 'quorum')) END FROM pg_stat_replication)`)
	if err != nil {
		return nil, fmt.Errorf("idemctl: replication settings: %w", err)
	}
	defer rows.Close()
	var r Replication
	var syncCount sql.NullInt64
	if !rows.Next() {
		return nil, fmt.Errorf("idemctl: replication settings: no row (%v)", rows.Err())
	}
	if err := rows.Scan(&r.SynchronousCommit, &r.SynchronousStandbyNames, &r.Standbys, &syncCount); err != nil {
		return nil, fmt.Errorf("idemctl: replication settings: %w", err)
	}
	r.SynchronousStandbys = int(syncCount.Int64) // NULL: no standby at all
	r.Synchronous, r.Warning = judge(r)
	return &r, rows.Close()
}

// judge says whether r keeps every acknowledged commit through a
// failover, and if not, what can be lost.
func judge(r Replication) (bool, string) {
	const loss = "; a standby promoted in a failover may lack the last commits this server acknowledged: their stored answers are gone, a retry with such a key runs the mutation again and answers differently, and side effects made with the key (a provider charge) stay without their row. Set synchronous_standby_names and synchronous_commit = on, or ignore this if the storage itself is replicated synchronously (RDS Multi-AZ instance, Aurora, Cloud SQL HA, Azure zone-redundant HA); see docs/replication.md"
	named := strings.TrimSpace(r.SynchronousStandbyNames) != ""
	switch {
	case r.SynchronousCommit != "on" && r.SynchronousCommit != "remote_apply":
		return false, "synchronous_commit is " + r.SynchronousCommit + ", below on" + loss
	case !named:
		return false, fmt.Sprintf("no synchronous standby (synchronous_standby_names is empty; %d standbys stream asynchronously)", r.Standbys) + loss
	}
	// Named, even with none connected now: commits then wait (nothing
	// acknowledged is lost; writes stop until a standby is back).
	return true, ""
}

// ReportReplication logs, once per Admin, at level Warn, what a failover
// can lose when the primary has no synchronous standby or
// synchronous_commit is below on (CheckReplication); it logs at Info when
// the setting keeps the promise, and nothing on SQLite. It does not
// refuse anything: a server without a standby is a choice its operator
// may make knowingly. RunSweeper calls it at its start; an application
// that does not run the sweeper calls it once at start.
func (a *Admin) ReportReplication(ctx context.Context) {
	a.mu.Lock()
	done := a.replicationReported
	a.replicationReported = true
	a.mu.Unlock()
	if done {
		return
	}
	r, err := CheckReplication(ctx, a.cfg.Backend.DB(), a.cfg.Backend.Dialect())
	switch {
	case err != nil:
		a.cfg.Logger.Warn("could not read the database's replication settings", slog.Any("error", err))
	case r == nil:
	case !r.Synchronous:
		a.cfg.Logger.Warn("PostgreSQL replication does not keep the idempotency promise through a failover: "+r.Warning,
			slog.String("synchronous_commit", r.SynchronousCommit), slog.String("synchronous_standby_names", r.SynchronousStandbyNames),
			slog.Int("standbys", r.Standbys))
	default:
		a.cfg.Logger.Info("PostgreSQL replication is synchronous: a failover keeps every acknowledged answer",
			slog.String("synchronous_commit", r.SynchronousCommit), slog.String("synchronous_standby_names", r.SynchronousStandbyNames),
			slog.Int("synchronous_standbys", r.SynchronousStandbys))
	}
}

// MetricReplicationSynchronous ("idem.replication.synchronous") is the
// gauge RegisterMetrics adds on PostgreSQL: 1 when the primary's settings
// keep every acknowledged commit through a failover
// (Replication.Synchronous), 0 when they do not. Sampled at each collection, so it
// also reports a promoted standby that now runs alone. Not reported on
// SQLite.
const MetricReplicationSynchronous = "idem.replication.synchronous"

// registerReplication adds MetricReplicationSynchronous to m on PostgreSQL.
func (a *Admin) registerReplication(m metric.Meter) error {
	if a.cfg.Backend.Dialect() != dialect.Postgres {
		return nil
	}
	g, err := m.Int64ObservableGauge(MetricReplicationSynchronous,
		metric.WithDescription("1 when every commit PostgreSQL acknowledges is on a synchronous standby (synchronous_commit on or remote_apply, synchronous_standby_names set); 0 when a failover can lose acknowledged answers."))
	if err != nil {
		return err
	}
	_, err = m.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		r, err := CheckReplication(ctx, a.cfg.Backend.DB(), a.cfg.Backend.Dialect())
		if err != nil {
			return err
		}
		v := int64(0)
		if r.Synchronous {
			v = 1
		}
		o.ObserveInt64(g, v)
		return nil
	}, g)
	return err
}
