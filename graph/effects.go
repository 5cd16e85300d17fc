package graph

import (
	"context"

	"entgo.io/ent/dialect"
	"go.opentelemetry.io/otel/metric"

	"github.com/goovo/idem/ent"
	"github.com/goovo/idem/idemdb"
	"github.com/goovo/idem/idemoutbox"
)

// effects is the one seam between the example and what delivers the
// effects its mutations record (the receipts) and folds its counter:
// River's outbox on PostgreSQL and SQLite (riverEffects), and on MySQL and
// MariaDB, which River has no driver for, the receipt table and small
// workers of the example's own (receiptTable): what docs/mysql.md tells a
// MySQL application to use instead of idemoutbox.
type effects interface {
	// enqueueReceipt records, in the transaction of the mutation running
	// in ctx, that r's receipt is to be sent: it exists if and only if
	// that transaction commits.
	enqueueReceipt(ctx context.Context, r SendReceiptArgs) error
	// migrate creates the tables the delivery needs (-migrate); validate
	// checks that they exist (-migrate=false).
	migrate(ctx context.Context, drv idemdb.Driver) error
	validate(ctx context.Context, drv idemdb.Driver) error
	// start runs the workers: the receipts' delivery and the counter's
	// fold.
	start(ctx context.Context, client *ent.Client, drv idemdb.Driver, w Workers) (*River, error)
	// registerMetrics reports the effects waiting on mp, under
	// idemoutbox's gauges.
	registerMetrics(mp metric.MeterProvider, drv idemdb.Driver) error
}

// effectsOf returns the delivery of the database of ent's dialect d.
func effectsOf(d string) effects {
	if d == dialect.MySQL {
		return receiptTable{}
	}
	return riverEffects{}
}

// riverEffects delivers through River: the receipt is a River job
// inserted in the mutation's transaction (idemoutbox.Enqueue), the fold
// a River periodic job.
type riverEffects struct{}

func (riverEffects) enqueueReceipt(ctx context.Context, r SendReceiptArgs) error {
	_, err := idemoutbox.Enqueue(ctx, r, nil)
	return err
}

func (riverEffects) migrate(ctx context.Context, drv idemdb.Driver) error {
	return idemoutbox.Migrate(ctx, drv.DB(), drv.Dialect())
}

func (riverEffects) validate(ctx context.Context, drv idemdb.Driver) error {
	// Versioned migrations: River's must have been applied with the rest
	// (cmd/migrate up).
	return idemoutbox.Validate(ctx, drv.DB(), drv.Dialect())
}

func (riverEffects) registerMetrics(mp metric.MeterProvider, drv idemdb.Driver) error {
	return idemoutbox.RegisterMetrics(mp, drv.DB(), drv.Dialect())
}

func (riverEffects) start(ctx context.Context, client *ent.Client, drv idemdb.Driver, w Workers) (*River, error) {
	return startRiver(ctx, client, drv, w)
}

// MigrateOutbox creates or updates the tables that deliver the example's
// effects in drv's database, beside the application's: River's on
// PostgreSQL and SQLite (MigrateRiver), the receipt table on MySQL
// (ReceiptTableSchema).
func MigrateOutbox(ctx context.Context, drv idemdb.Driver) error {
	return effectsOf(drv.Dialect()).migrate(ctx, drv)
}

// RegisterOutboxMetrics reports how many effects wait and how old the
// oldest is on mp, under idemoutbox's gauges (idemoutbox.MetricJobsWaiting
// and the others): River's jobs (idemoutbox.RegisterMetrics), or on MySQL
// the receipt table's rows, so that the outbox's alert and dashboard
// panels work on every database.
func RegisterOutboxMetrics(mp metric.MeterProvider, drv idemdb.Driver) error {
	return effectsOf(drv.Dialect()).registerMetrics(mp, drv)
}

// ValidateOutbox checks that the tables MigrateOutbox creates exist, for
// a server that migrates nothing (-migrate=false).
func ValidateOutbox(ctx context.Context, drv idemdb.Driver) error {
	return effectsOf(drv.Dialect()).validate(ctx, drv)
}
