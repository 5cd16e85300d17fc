package graph

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"entgo.io/ent/dialect"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/goovo/idem/ent"
	"github.com/goovo/idem/idemdb"
	"github.com/goovo/idem/idemoutbox"
	"github.com/goovo/idem/internal/example/counter"
	"github.com/goovo/idem/internal/example/mailer"
	"github.com/goovo/idem/internal/example/provider"
	"github.com/goovo/idem/internal/example/simsql"
)

// ReceiptTable is the example's own outbox on MySQL and MariaDB, where
// River (idemoutbox) does not run: one row per receipt to send, inserted
// in the payment's transaction, so that it exists if and only if the
// payment committed, and once per payment (its unique payment_id) whatever
// the takeovers. Workers of every server deliver the rows after the
// commit and mark each delivered.
const ReceiptTable = "receipt_outbox"

// ReceiptTableSchema is ReceiptTable's CREATE TABLE IF NOT EXISTS on
// MySQL. The pending rows are found by the (delivered_at, id) index;
// downstream_key is what the mailer deduplicates by
// (idemoutbox.EffectKey).
const ReceiptTableSchema = `CREATE TABLE IF NOT EXISTS receipt_outbox (
	id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
	tenant VARCHAR(255) NOT NULL,
	order_id BIGINT NOT NULL,
	payment_id BIGINT NOT NULL,
	downstream_key VARCHAR(64) NOT NULL,
	created_at DATETIME(6) NOT NULL,
	delivered_at DATETIME(6) NULL,
	UNIQUE KEY receipt_outbox_payment_id (payment_id),
	KEY receipt_outbox_pending (delivered_at, id))` + simsql.MySQLTableOptions

// MySQLTables are the CREATE TABLE IF NOT EXISTS statements of what the
// example keeps on MySQL beside ent's schema: the simulated provider's
// ledger, the simulated mailer's records (both in the provider's
// database) and ReceiptTable (in the application's). -migrate runs them;
// versioned migrations for MySQL must hold the same.
func MySQLTables() []string {
	return []string{provider.CreateTable(dialect.MySQL), mailer.CreateTable(dialect.MySQL), ReceiptTableSchema}
}

// receiptTable delivers through ReceiptTable, and folds the counter on a
// ticker (counter.Fold is exactly once with any number of folders).
type receiptTable struct{}

func (receiptTable) enqueueReceipt(ctx context.Context, r SendReceiptArgs) error {
	key, err := idemoutbox.EffectKey(ctx, r.Kind())
	if err != nil {
		return err
	}
	_, err = ent.FromContext(ctx).ExecContext(ctx, `INSERT INTO receipt_outbox
		(tenant, order_id, payment_id, downstream_key, created_at) VALUES (?, ?, ?, ?, UTC_TIMESTAMP(6))`,
		r.Tenant, r.OrderID, r.PaymentID, key)
	return err
}

func (receiptTable) migrate(ctx context.Context, drv idemdb.Driver) error {
	if _, err := drv.DB().ExecContext(ctx, ReceiptTableSchema); err != nil {
		return fmt.Errorf("receipt table: %w", err)
	}
	return nil
}

func (receiptTable) validate(ctx context.Context, drv idemdb.Driver) error {
	err := simsql.Check(ctx, drv.DB(), ReceiptTable, "id", "tenant", "order_id", "payment_id",
		"downstream_key", "created_at", "delivered_at")
	if err != nil {
		return fmt.Errorf("%w: -migrate=false creates no table: start once with -migrate, or create it with graph.ReceiptTableSchema (graph.MySQLTables holds every table the example adds on MySQL)", err)
	}
	return nil
}

// registerMetrics reports ReceiptTable under idemoutbox's gauges, with
// the kind of River's receipt job: waiting counts the undelivered rows,
// those being delivered among them (running, which a locked row would
// need a locking read to tell, is 0); failed is 0, since a row is tried
// until it is delivered.
func (receiptTable) registerMetrics(mp metric.MeterProvider, drv idemdb.Driver) error {
	m := mp.Meter("github.com/goovo/idem/graph")
	waiting, err1 := m.Int64ObservableGauge(idemoutbox.MetricJobsWaiting, metric.WithDescription("receipts waiting for delivery in the receipt table (MySQL), those being delivered among them"))
	running, err2 := m.Int64ObservableGauge(idemoutbox.MetricJobsRunning, metric.WithDescription("0 on MySQL: the receipts being delivered count as waiting"))
	failed, err3 := m.Int64ObservableGauge(idemoutbox.MetricJobsFailed, metric.WithDescription("0 on MySQL: a receipt is tried until it is delivered"))
	oldest, err4 := m.Float64ObservableGauge(idemoutbox.MetricOldestWaiting, metric.WithUnit("s"), metric.WithDescription("age of the oldest receipt waiting for delivery"))
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return err
	}
	kind := metric.WithAttributes(attribute.String("kind", SendReceiptArgs{}.Kind()))
	_, err := m.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		var (
			n   int64
			age sql.NullInt64
		)
		err := drv.DB().QueryRowContext(ctx, `SELECT count(*), TIMESTAMPDIFF(MICROSECOND, min(created_at), UTC_TIMESTAMP(6))
			FROM receipt_outbox WHERE delivered_at IS NULL`).Scan(&n, &age)
		if err != nil {
			return fmt.Errorf("receipt table: %w", err)
		}
		o.ObserveInt64(waiting, n, kind)
		o.ObserveInt64(running, 0, kind)
		o.ObserveInt64(failed, 0, kind)
		o.ObserveFloat64(oldest, (time.Duration(age.Int64) * time.Microsecond).Seconds(), kind)
		return nil
	}, waiting, running, failed, oldest)
	return err
}

// Receipt workers: each process runs receiptWorkers loops, each delivering
// up to receiptBatch rows per transaction; DefaultReceiptPoll is how often
// a loop that found nothing looks again.
const (
	receiptWorkers = 2
	receiptBatch   = 10
	// DefaultReceiptPoll is Workers.PollInterval's default on MySQL: a
	// receipt is sent within about a second of its payment's commit, and
	// of a restart after a crash.
	DefaultReceiptPoll = time.Second
)

func (receiptTable) start(ctx context.Context, client *ent.Client, drv idemdb.Driver, w Workers) (*River, error) {
	if w.Mailer == nil {
		return nil, errors.New("graph: StartWorkers needs a mailer")
	}
	poll := w.PollInterval
	if poll <= 0 {
		poll = DefaultReceiptPoll
	}
	logger := w.Logger
	if logger == nil {
		logger = slog.Default()
	}
	g := newLoops(ctx, logger)
	d := receiptDelivery{db: drv.DB(), mailer: w.Mailer}
	for range receiptWorkers {
		g.run(poll, d.deliver)
	}
	if w.FoldEvery > 0 {
		batch := max(w.FoldBatch, 1)
		g.run(w.FoldEvery, func(ctx context.Context) (bool, error) {
			n, err := counter.Fold(ctx, client, batch)
			return n == batch, err
		})
	}
	check := func(ctx context.Context) error {
		if g.stopped.Load() {
			return errors.New("the receipt workers stopped")
		}
		return simsql.Check(ctx, drv.DB(), ReceiptTable, "id")
	}
	return &River{Name: "workers", Stop: g.stop, Check: check}, nil
}

// receiptDelivery sends the pending receipts of ReceiptTable.
type receiptDelivery struct {
	db     *sql.DB
	mailer *mailer.Simulated
}

type pendingReceipt struct {
	id  int64
	r   SendReceiptArgs
	key string
}

// deliver sends up to receiptBatch pending receipts and marks them
// delivered, in one transaction that holds their rows: SKIP LOCKED lets
// the other loops and servers take the next rows meanwhile, and a process
// that dies before the commit loses its connection, which rolls back and
// frees the rows for the next poll of any server. Delivery is thus at
// least once; the mailer sends once per downstream key. READ COMMITTED
// takes no gap locks, which would hold back the payments inserting rows.
// more reports a full batch: more rows may wait.
func (d receiptDelivery) deliver(ctx context.Context) (more bool, err error) {
	tx, err := d.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return false, err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	pending, err := lockPending(ctx, tx)
	if err != nil || len(pending) == 0 {
		return false, err
	}
	var sendErr error
	for _, p := range pending {
		if sendErr = d.mailer.SendReceipt(ctx, p.r.Tenant, p.r.OrderID, p.r.PaymentID, p.key); sendErr != nil {
			break // the rest wait for the next poll
		}
		if _, err := tx.ExecContext(ctx, `UPDATE receipt_outbox SET delivered_at = UTC_TIMESTAMP(6) WHERE id = ?`, p.id); err != nil {
			return false, err
		}
	}
	if err := tx.Commit(); err != nil {
		return false, err
	}
	return sendErr == nil && len(pending) == receiptBatch, sendErr
}

// lockPending locks the oldest pending receipts no one else holds.
func lockPending(ctx context.Context, tx *sql.Tx) ([]pendingReceipt, error) {
	rows, err := tx.QueryContext(ctx, `SELECT id, tenant, order_id, payment_id, downstream_key
		FROM receipt_outbox WHERE delivered_at IS NULL ORDER BY id LIMIT ? FOR UPDATE SKIP LOCKED`, receiptBatch)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []pendingReceipt
	for rows.Next() {
		var p pendingReceipt
		if err := rows.Scan(&p.id, &p.r.Tenant, &p.r.OrderID, &p.r.PaymentID, &p.key); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// loops runs background loops until stop: each runs its step at once,
// again at once while the step reports more, else after its interval.
type loops struct {
	work     context.Context // cancelled when stop gives up waiting
	cancel   context.CancelFunc
	stopping chan struct{} // closed by stop: no new step starts
	wg       sync.WaitGroup
	stopped  atomic.Bool
	once     sync.Once
	logger   *slog.Logger
}

func newLoops(ctx context.Context, logger *slog.Logger) *loops {
	// The loops live until stop, not until ctx ends: stopping waits for
	// the steps under way, as River's Stop does.
	work, cancel := context.WithCancel(context.WithoutCancel(ctx))
	return &loops{work: work, cancel: cancel, stopping: make(chan struct{}), logger: logger}
}

func (g *loops) run(every time.Duration, step func(context.Context) (more bool, err error)) {
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		for {
			select {
			case <-g.stopping:
				return
			default:
			}
			more, err := step(g.work)
			if err != nil && g.work.Err() == nil {
				g.logger.Warn("background work failed; it runs again at its next turn", "err", err)
			}
			if more && err == nil {
				continue
			}
			select {
			case <-g.stopping:
				return
			case <-time.After(every):
			}
		}
	}()
}

// stop stops the loops, waiting for the steps under way until ctx ends;
// then it cancels them and waits up to cancelWait more.
func (g *loops) stop(ctx context.Context) error {
	g.once.Do(func() { close(g.stopping); g.stopped.Store(true) })
	done := make(chan struct{})
	go func() { g.wg.Wait(); close(done) }()
	select {
	case <-done:
		g.cancel()
		return nil
	case <-ctx.Done():
	}
	g.cancel()
	select {
	case <-done:
	case <-time.After(cancelWait):
	}
	return ctx.Err()
}
