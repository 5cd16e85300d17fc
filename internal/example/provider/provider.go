// Package provider simulates the payment provider of the example
// application: a system outside the application's database that charges
// money, with latency and failures, and that deduplicates charges by
// (tenant, idempotency key) as Stripe does. It keeps its ledger in its own
// table, written outside the application's transactions, so that a charge
// survives a rollback or a crash of the application, as a real one would.
package provider

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	mathrand "math/rand/v2"
	"time"

	"entgo.io/ent/dialect"

	"github.com/goovo/idem/internal/example/simsql"
	"github.com/goovo/idem/internal/timer"
)

// Provider charges money.
type Provider interface {
	// Charge executes req once per (Tenant, Key): a request with a key the
	// provider has seen returns the first charge instead of charging again,
	// and fails if its amount or order differ.
	Charge(ctx context.Context, req ChargeRequest) (*Charge, error)
	// Charges lists the charges executed for an order of a tenant, oldest
	// first.
	Charges(ctx context.Context, tenant string, orderID int) ([]*Charge, error)
	// Void cancels the charge made with (tenant, key), if there is one, and
	// reports whether there was. Voiding twice is voiding once.
	Void(ctx context.Context, tenant, key string) (bool, error)
}

// ChargeRequest asks for one charge.
type ChargeRequest struct {
	Tenant string
	// User is who asks for the money within the tenant ("" for nobody in
	// particular): the provider records it with the charge.
	User     string
	Key      string
	OrderID  int
	Amount   int
	Currency string
}

// Charge is a charge the provider executed.
type Charge struct {
	ID             string
	OrderID        int
	Amount         int
	Currency       string
	IdempotencyKey string
	// RequestedBy is the user of the request that made the charge ("" for
	// none). A deduplicated request does not change it.
	RequestedBy string
	// Requests counts the requests with this charge's key that reached the
	// provider: 1 unless a retry was deduplicated.
	Requests int
	// Voided: the money was given back (an attempt that charged lost to a
	// competing payment).
	Voided    bool
	CreatedAt time.Time
}

// ErrUnavailable is the simulated outage: nothing was charged.
var ErrUnavailable = errors.New("payment provider unavailable")

// ErrKeyMismatch: the key was used before for a different charge.
var ErrKeyMismatch = errors.New("payment provider: idempotency key reused for a different charge")

// Simulated is the provider of the example server and its tests.
type Simulated struct {
	db      *sql.DB
	dialect string

	// Latency is added to every charge before it executes.
	Latency time.Duration
	// ResponseLatency is added after a charge executed, before its answer
	// returns: a crash of the caller in that window leaves money charged and
	// books unwritten, the article's partial success.
	ResponseLatency time.Duration
	// FailureRate is the probability (0 to 1) that a charge fails with
	// ErrUnavailable before it executes.
	FailureRate float64
	// Gate, when set, is called after a charge executed (and its
	// ResponseLatency passed), before its answer returns: the charge stays
	// in flight until Gate returns, and Gate's error is the call's. A test
	// holds a payment in flight there until it has done what it must in
	// that window; a latency only guesses how long that takes, and a busy
	// machine outlasts any guess.
	Gate func(ctx context.Context, req ChargeRequest) error
}

// Table is the table of the simulated provider's ledger.
const Table = "provider_charges"

// NewSimulated returns a provider that keeps its ledger in db, a database
// of ent's dialect d (dialect.Postgres, dialect.MySQL or dialect.SQLite).
// The ledger's table must
// exist (Migrate, or the versioned migrations): a missing one is
// simsql.ErrNotMigrated, and nothing is created.
func NewSimulated(ctx context.Context, db *sql.DB, d string) (*Simulated, error) {
	err := simsql.Check(ctx, db, Table, "id", "tenant", "idempotency_key", "order_id", "amount",
		"currency", "requests", "voided", "created_at", "requested_by")
	if err != nil {
		return nil, fmt.Errorf("provider: %w", err)
	}
	return &Simulated{db: db, dialect: d}, nil
}

// Migrate creates the ledger's table in db, a database of ent's dialect
// d, or adds what an older one lacks: the example server's automatic
// migration (-migrate). On PostgreSQL, ent/migrate/migrations holds the
// same table for the versioned path (cmd/migrate up). A real provider
// keeps its ledger in its own system; this one is a stand-in kept beside
// the application's tables so that tests can count its charges.
func Migrate(ctx context.Context, db *sql.DB, d string) error {
	if _, err := db.ExecContext(ctx, CreateTable(d)); err != nil {
		return fmt.Errorf("provider: create ledger: %w", err)
	}
	// A ledger made before charges recorded their user gets the column.
	var has int
	q := `SELECT count(*) FROM pragma_table_info('provider_charges') WHERE name = 'requested_by'`
	switch d {
	case dialect.Postgres:
		q = `SELECT count(*) FROM information_schema.columns
			WHERE table_schema = current_schema() AND table_name = 'provider_charges' AND column_name = 'requested_by'`
	case dialect.MySQL:
		q = `SELECT count(*) FROM information_schema.columns
			WHERE table_schema = DATABASE() AND table_name = 'provider_charges' AND column_name = 'requested_by'`
	}
	if err := db.QueryRowContext(ctx, q).Scan(&has); err != nil {
		return fmt.Errorf("provider: read ledger: %w", err)
	}
	if has == 0 {
		if _, err := db.ExecContext(ctx, `ALTER TABLE provider_charges ADD COLUMN requested_by TEXT NOT NULL DEFAULT ''`); err != nil {
			return fmt.Errorf("provider: upgrade ledger: %w", err)
		}
	}
	return nil
}

// CreateTable is the CREATE TABLE IF NOT EXISTS statement of the ledger
// on ent's dialect d: what Migrate runs, and what a versioned migration
// must hold.
func CreateTable(d string) string {
	if d == dialect.MySQL {
		// MySQL indexes no TEXT without a length: the keyed columns are
		// VARCHARs (the unique key's 510 characters take 2040 of
		// InnoDB's 3072 bytes).
		return `CREATE TABLE IF NOT EXISTS provider_charges (
		id VARCHAR(64) PRIMARY KEY,
		tenant VARCHAR(255) NOT NULL,
		idempotency_key VARCHAR(255) NOT NULL,
		order_id BIGINT NOT NULL,
		amount BIGINT NOT NULL,
		currency VARCHAR(16) NOT NULL,
		requests INTEGER NOT NULL DEFAULT 1,
		voided BOOLEAN NOT NULL DEFAULT false,
		created_at DATETIME(6) NOT NULL,
		requested_by VARCHAR(255) NOT NULL DEFAULT '',
		UNIQUE (tenant, idempotency_key))` + simsql.MySQLTableOptions
	}
	return `CREATE TABLE IF NOT EXISTS provider_charges (
		id TEXT PRIMARY KEY,
		tenant TEXT NOT NULL,
		idempotency_key TEXT NOT NULL,
		order_id BIGINT NOT NULL,
		amount BIGINT NOT NULL,
		currency TEXT NOT NULL,
		requests INTEGER NOT NULL DEFAULT 1,
		voided BOOLEAN NOT NULL DEFAULT false,
		created_at ` + simsql.TimeColumn(d) + ` NOT NULL,
		requested_by TEXT NOT NULL DEFAULT '',
		UNIQUE (tenant, idempotency_key))`
}

// Charge implements Provider.
func (s *Simulated) Charge(ctx context.Context, req ChargeRequest) (*Charge, error) {
	if req.Tenant == "" || req.Key == "" {
		return nil, errors.New("provider: a charge needs a tenant and an idempotency key")
	}
	if err := timer.Sleep(ctx, s.Latency); err != nil {
		return nil, err
	}
	if s.FailureRate > 0 && mathrand.Float64() < s.FailureRate {
		return nil, ErrUnavailable
	}
	id := make([]byte, 12)
	_, _ = rand.Read(id)
	c, err := s.insert(ctx, "ch_"+hex.EncodeToString(id), req)
	if err != nil {
		return nil, fmt.Errorf("provider: charge: %w", err)
	}
	if c.OrderID != req.OrderID || c.Amount != req.Amount || c.Currency != req.Currency {
		return nil, ErrKeyMismatch
	}
	if err := timer.Sleep(ctx, s.ResponseLatency); err != nil {
		return nil, err
	}
	if s.Gate != nil {
		if err := s.Gate(ctx, req); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// insert records the charge req under id, or counts one more request for
// its key, and returns the charge of its key. MySQL has no RETURNING (and
// MariaDB's does not follow ON DUPLICATE KEY's update): the charge is read
// back by its key, which no statement deletes.
func (s *Simulated) insert(ctx context.Context, id string, req ChargeRequest) (*Charge, error) {
	insert := `INSERT INTO provider_charges
		(id, tenant, idempotency_key, order_id, amount, currency, requests, created_at, requested_by)
		VALUES ($1, $2, $3, $4, $5, $6, 1, $7, $8)`
	args := []any{id, req.Tenant, req.Key, req.OrderID, req.Amount, req.Currency, simsql.Now(s.dialect), req.User}
	if s.dialect != dialect.MySQL {
		return s.scan(s.db.QueryRowContext(ctx, simsql.Rebind(s.dialect, insert+`
		ON CONFLICT (tenant, idempotency_key) DO UPDATE SET requests = provider_charges.requests + 1
		RETURNING `+chargeColumns), args...))
	}
	if _, err := s.db.ExecContext(ctx, simsql.Rebind(s.dialect, insert+` ON DUPLICATE KEY UPDATE requests = requests + 1`), args...); err != nil {
		return nil, err
	}
	return s.scan(s.db.QueryRowContext(ctx, `SELECT `+chargeColumns+`
		FROM provider_charges WHERE tenant = ? AND idempotency_key = ?`, req.Tenant, req.Key))
}

// Charges implements Provider.
func (s *Simulated) Charges(ctx context.Context, tenant string, orderID int) ([]*Charge, error) {
	rows, err := s.db.QueryContext(ctx, simsql.Rebind(s.dialect, `SELECT `+chargeColumns+`
		FROM provider_charges WHERE tenant = $1 AND order_id = $2 ORDER BY created_at, id`), tenant, orderID)
	if err != nil {
		return nil, fmt.Errorf("provider: list charges: %w", err)
	}
	defer rows.Close()
	var out []*Charge
	for rows.Next() {
		c, err := s.scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// Void implements Provider.
func (s *Simulated) Void(ctx context.Context, tenant, key string) (bool, error) {
	res, err := s.db.ExecContext(ctx, simsql.Rebind(s.dialect, `UPDATE provider_charges SET voided = true WHERE tenant = $1 AND idempotency_key = $2`), tenant, key)
	if err != nil {
		return false, fmt.Errorf("provider: void: %w", err)
	}
	n, err := res.RowsAffected()
	return n > 0, err
}

type scanner interface{ Scan(...any) error }

// chargeColumns are a Charge's columns, as scan reads them.
const chargeColumns = `id, order_id, amount, currency, idempotency_key, requests, voided, created_at, requested_by`

func (s *Simulated) scan(r scanner) (*Charge, error) {
	var (
		c       Charge
		created any
	)
	if err := r.Scan(&c.ID, &c.OrderID, &c.Amount, &c.Currency, &c.IdempotencyKey, &c.Requests, &c.Voided, &created, &c.RequestedBy); err != nil {
		return nil, err
	}
	switch v := created.(type) {
	case time.Time:
		c.CreatedAt = v
	case string:
		c.CreatedAt, _ = time.Parse(time.RFC3339Nano, v)
	}
	return &c, nil
}
