package graph

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"entgo.io/ent/dialect"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverdatabasesql"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"

	"github.com/goovo/idem/ent"
	"github.com/goovo/idem/idemdb"
	"github.com/goovo/idem/idemdb/pgxdriver"
	"github.com/goovo/idem/idemoutbox"
	"github.com/goovo/idem/internal/example/counter"
	"github.com/goovo/idem/internal/example/mailer"
)

// SendReceiptArgs is the job that sends the receipt of a paid payment: pay
// enqueues it in the payment's transaction (idemoutbox.Enqueue), so that
// a payment's receipt is sent if and only if the payment committed.
type SendReceiptArgs struct {
	Tenant    string `json:"tenant"`
	OrderID   int    `json:"order_id"`
	PaymentID int    `json:"payment_id"`
}

// Kind implements river.JobArgs.
func (SendReceiptArgs) Kind() string { return "send_receipt" }

// OutboxQueue is the River queue of the outbox's jobs: apart from the
// counter's fold on River's default queue, so that a slow mailer does not
// hold the fold back, nor the reverse, and each has its own workers.
const OutboxQueue = "outbox"

// InsertOpts implements river.JobArgsWithInsertOpts: the receipts go on
// OutboxQueue.
func (SendReceiptArgs) InsertOpts() river.InsertOpts { return river.InsertOpts{Queue: OutboxQueue} }

// sendReceipt sends a receipt through the mailer with the job's downstream
// key: River may run a job twice (a worker that died after the mailer
// answered), and the mailer sends once per key.
type sendReceipt struct {
	river.WorkerDefaults[SendReceiptArgs]
	mailer *mailer.Simulated
}

func (w *sendReceipt) Work(ctx context.Context, job *river.Job[SendReceiptArgs]) error {
	return w.mailer.SendReceipt(ctx, job.Args.Tenant, job.Args.OrderID, job.Args.PaymentID, idemoutbox.DownstreamKey(job.JobRow))
}

// foldPageViewsArgs is the counter materialiser's periodic job: River's
// leader enqueues it every Workers.FoldEvery, and one process works it
// (counter.Fold is exactly once with any number of folders at a time;
// this only spares them the work).
type foldPageViewsArgs struct{}

func (foldPageViewsArgs) Kind() string { return "fold_page_views" }

type foldPageViews struct {
	river.WorkerDefaults[foldPageViewsArgs]
	client *ent.Client
	batch  int
}

func (w *foldPageViews) Work(ctx context.Context, _ *river.Job[foldPageViewsArgs]) error {
	for {
		n, err := counter.Fold(ctx, w.client, w.batch)
		if err != nil || n < w.batch {
			return err
		}
	}
}

// Workers configure the example's workers (StartWorkers): River's
// client, or on MySQL the receipt table's workers and the counter's
// ticker, which read only Mailer, FoldEvery, FoldBatch, PollInterval and
// Logger.
type Workers struct {
	// ID names this process's River client; stable across restarts of one
	// process (the server's -river-id), so that River tells its own jobs
	// from others'. Empty: River makes one up.
	ID string
	// Mailer sends the receipts.
	Mailer *mailer.Simulated
	// FoldEvery is how often the page views are folded into counts (0:
	// never), FoldBatch how many per transaction.
	FoldEvery time.Duration
	FoldBatch int
	// PollOnly polls for jobs without LISTEN, which PgBouncer's transaction
	// pooling cannot hold; PollInterval is how often (0: River's 1s). On
	// MySQL the receipt workers always poll, every PollInterval (0:
	// DefaultReceiptPoll).
	PollOnly     bool
	PollInterval time.Duration
	// RescueAfter is how long a job may run before River's leader takes it
	// for stuck (its process died while it ran) and runs it again
	// (default DefaultRescueAfter; the mailer deduplicates the second
	// delivery). A job is timed out at half of it.
	RescueAfter time.Duration
	// MaxConns is the size of River's own pool, which it opens behind
	// PgBouncer's transaction pooling (the pool's exec modes) on
	// PostgreSQL; DefaultRiverMaxConns when 0. It counts in the connection
	// budget beside the application's pool.
	MaxConns int
	Logger   *slog.Logger
}

// DefaultRiverMaxConns is Workers.MaxConns's default: River's fetches,
// its leader's maintenance and its job completions each take a connection
// for a moment.
const DefaultRiverMaxConns = 4

// DefaultRescueAfter is Workers.RescueAfter's default. River's leader
// looks for stuck jobs every 30 s (not configurable), and a new leader is
// elected up to 15 s after the old one died: with 10 s, a receipt whose
// delivery a crash interrupted arrives within the contract's 30 s of the
// restart (with a minute, it took 82 s on PostgreSQL: the leader's passes
// at 20 and 50 s after the crash found the job too young, the one at
// 80 s rescued it).
const DefaultRescueAfter = 10 * time.Second

// MigrateRiver creates or updates River's tables in drv's database, beside
// the application's: what ent's automatic migration (-migrate) does for
// them. cmd/migrate's versioned files hold the same.
func MigrateRiver(ctx context.Context, drv idemdb.Driver) error {
	return idemoutbox.Migrate(ctx, drv.DB(), drv.Dialect())
}

// StartWorkers starts the example's workers on drv's database: the
// receipts, and the counter materialiser (River's client, or on MySQL
// the receipt table's workers: StartRiver). stop stops it, waiting for the
// jobs that run.
func StartWorkers(ctx context.Context, client *ent.Client, drv idemdb.Driver, w Workers) (stop func(context.Context) error, err error) {
	r, err := StartRiver(ctx, client, drv, w)
	if err != nil {
		return nil, err
	}
	return r.Stop, nil
}

// cancelWait bounds how long River.Stop waits, once its context has ended,
// for the jobs whose context it cancelled.
const cancelWait = 5 * time.Second

// River is the example's running background workers (StartRiver): River's
// client on PostgreSQL and SQLite; on MySQL, where River does not run, the
// receipt table's workers and the counter's ticker.
type River struct {
	// Name is the readiness check's name: "river", or "workers" on MySQL.
	Name string
	// Stop stops the client, waiting for the jobs that run until ctx ends;
	// then it cancels those still running and waits up to five seconds
	// more for them to return.
	Stop func(ctx context.Context) error
	// Check is the readiness check (idemhttp.ReadinessCheck): River's
	// client has not stopped, and answers a listing of one queue through
	// its own driver and pool (on MySQL: the workers have not stopped, and
	// their table answers).
	Check func(ctx context.Context) error
}

// StartRiver is StartWorkers, with the workers' readiness check. On MySQL
// and MariaDB, which River has no driver for, it starts the receipt
// table's workers and folds the counter on a ticker instead
// (ReceiptTable); Workers' River-only fields (ID, PollOnly, RescueAfter,
// MaxConns) mean nothing there.
func StartRiver(ctx context.Context, client *ent.Client, drv idemdb.Driver, w Workers) (*River, error) {
	return effectsOf(drv.Dialect()).start(ctx, client, drv, w)
}

// startRiver is StartRiver on River's backends.
func startRiver(ctx context.Context, client *ent.Client, drv idemdb.Driver, w Workers) (*River, error) {
	if w.Mailer == nil {
		return nil, errors.New("graph: StartWorkers needs a mailer")
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, &sendReceipt{mailer: w.Mailer})
	rescue := w.RescueAfter
	if rescue <= 0 {
		rescue = DefaultRescueAfter
	}
	cfg := &river.Config{
		ID:                   w.ID,
		JobTimeout:           rescue / 2,
		RescueStuckJobsAfter: rescue,
		Workers:              workers,
		Queues:               map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 10}, OutboxQueue: {MaxWorkers: 10}},
		PollOnly:             w.PollOnly,
		FetchPollInterval:    w.PollInterval,
		Logger:               w.Logger,
	}
	// Every process works the fold, which any may be handed; the leader
	// enqueues it, so every process must be given the same FoldEvery.
	river.AddWorker(workers, &foldPageViews{client: client, batch: max(w.FoldBatch, 1)})
	if w.FoldEvery > 0 {
		cfg.PeriodicJobs = []*river.PeriodicJob{river.NewPeriodicJob(river.PeriodicInterval(w.FoldEvery),
			func() (river.JobArgs, *river.InsertOpts) { return foldPageViewsArgs{}, nil },
			&river.PeriodicJobOpts{RunOnStart: true})}
	}
	if cfg.FetchPollInterval > 0 {
		cfg.FetchCooldown = min(cfg.FetchPollInterval, 100*time.Millisecond)
	}
	switch d := drv.(type) {
	case *pgxdriver.Driver:
		pool := d.Pool()
		switch pool.Config().ConnConfig.DefaultQueryExecMode {
		case pgx.QueryExecModeExec, pgx.QueryExecModeSimpleProtocol:
			// Behind PgBouncer: River passes []byte for jsonb, which these
			// modes send as bytea; a small pool of its own learns each
			// statement's parameter types once per connection
			// (cache_describe) and then sends every statement whole in one
			// round trip, which transaction pooling allows. Not
			// describe_exec: outside a transaction its second round trip
			// may reach another server connection, where the unnamed
			// statement it described does not exist (SQLSTATE 26000, seen
			// at River's start under load).
			pc := pool.Config()
			pc.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeCacheDescribe
			pc.MaxConns = DefaultRiverMaxConns
			if w.MaxConns > 0 {
				pc.MaxConns = int32(w.MaxConns)
			}
			pc.MinConns = min(pc.MinConns, pc.MaxConns)
			own, err := pgxpool.NewWithConfig(ctx, pc)
			if err != nil {
				return nil, fmt.Errorf("river: %w", err)
			}
			r, err := start(ctx, riverpgxv5.New(own), cfg)
			if err != nil {
				own.Close()
				return nil, err
			}
			stop := r.Stop
			r.Stop = func(ctx context.Context) error {
				defer own.Close()
				return stop(ctx)
			}
			return r, nil
		}
		return start(ctx, riverpgxv5.New(pool), cfg)
	default:
		if drv.Dialect() == dialect.SQLite {
			return start(ctx, riversqlite.New(drv.DB()), cfg)
		}
		return start(ctx, riverdatabasesql.New(drv.DB()), cfg)
	}
}

func start[TTx any](ctx context.Context, d riverdriver.Driver[TTx], cfg *river.Config) (*River, error) {
	c, err := river.NewClient(d, cfg)
	if err != nil {
		return nil, fmt.Errorf("river: %w", err)
	}
	// The client lives until stop, not until ctx ends: stopping waits for
	// the running jobs.
	if err := c.Start(context.WithoutCancel(ctx)); err != nil {
		return nil, fmt.Errorf("river: %w", err)
	}
	check := func(ctx context.Context) error {
		select {
		case <-c.Stopped():
			return errors.New("river: the client stopped")
		default:
		}
		_, err := c.QueueList(ctx, river.NewQueueListParams().First(1))
		return err
	}
	stop := func(ctx context.Context) error {
		err := c.Stop(ctx)
		if err != nil && ctx.Err() != nil {
			// The jobs still running are cancelled, and waited for a
			// moment, so that none is cut by its pool closing; River runs
			// each again later.
			cancelled, cancel := context.WithTimeout(context.WithoutCancel(ctx), cancelWait)
			defer cancel()
			_ = c.StopAndCancel(cancelled)
		}
		return err
	}
	return &River{Name: "river", Stop: stop, Check: check}, nil
}
