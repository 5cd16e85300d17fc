// Package mailer simulates the mail service of the example application:
// a system outside the application's database that sends the receipt of a
// paid payment, and that deduplicates by the downstream key the outbox
// gives each effect (idemoutbox.DownstreamKey), as a real mail API does by
// its idempotency key. It records every delivery, and how many times it
// was asked for it, in a table of its own written outside the
// application's transactions (in the provider's database), so that tools
// check from outside that every paid payment has exactly one receipt.
package mailer

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"entgo.io/ent/dialect"

	"github.com/goovo/idem/internal/example/simsql"
	"github.com/goovo/idem/internal/timer"
)

// Receipt is a receipt the mailer sent.
type Receipt struct {
	ID        string
	PaymentID int
	OrderID   int
	// Requests counts the requests for this receipt (its downstream key)
	// that reached the mailer: 1 unless a redelivery was deduplicated.
	Requests int
	SentAt   time.Time
}

// Simulated is the mailer of the example server and its tests.
type Simulated struct {
	db      *sql.DB
	dialect string

	// Latency is added to every request before the mailer records it: a
	// crash of the sender in that window leaves a committed payment whose
	// receipt is not sent yet.
	Latency time.Duration
}

// Table is the table of the simulated mailer's records.
const Table = "mailer_receipts"

// NewSimulated returns a mailer that keeps its records in db, a database
// of ent's dialect d (dialect.Postgres, dialect.MySQL or dialect.SQLite).
// Its table must exist
// (Migrate, or the versioned migrations): a missing one is
// simsql.ErrNotMigrated, and nothing is created.
func NewSimulated(ctx context.Context, db *sql.DB, d string) (*Simulated, error) {
	err := simsql.Check(ctx, db, Table, "id", "tenant", "downstream_key", "order_id", "payment_id",
		"requests", "sent_at")
	if err != nil {
		return nil, fmt.Errorf("mailer: %w", err)
	}
	return &Simulated{db: db, dialect: d}, nil
}

// Migrate creates the mailer's table in db, a database of ent's dialect
// d: the example server's automatic migration (-migrate). On PostgreSQL,
// ent/migrate/migrations holds the same table for the versioned path
// (cmd/migrate up). A real mail service keeps its records in its own
// system; this one is a stand-in kept beside the application's tables so
// that tests can count its receipts.
func Migrate(ctx context.Context, db *sql.DB, d string) error {
	if _, err := db.ExecContext(ctx, CreateTable(d)); err != nil {
		return fmt.Errorf("mailer: create table: %w", err)
	}
	return nil
}

// CreateTable is the CREATE TABLE IF NOT EXISTS statement of the mailer's
// table on ent's dialect d: what Migrate runs, and what a versioned
// migration must hold.
func CreateTable(d string) string {
	if d == dialect.MySQL {
		// MySQL indexes no TEXT without a length: the keyed columns are
		// VARCHARs.
		return `CREATE TABLE IF NOT EXISTS mailer_receipts (
		id VARCHAR(64) PRIMARY KEY,
		tenant VARCHAR(255) NOT NULL,
		downstream_key VARCHAR(255) NOT NULL UNIQUE,
		order_id BIGINT NOT NULL,
		payment_id BIGINT NOT NULL,
		requests INTEGER NOT NULL DEFAULT 1,
		sent_at DATETIME(6) NOT NULL)` + simsql.MySQLTableOptions
	}
	return `CREATE TABLE IF NOT EXISTS mailer_receipts (
		id TEXT PRIMARY KEY,
		tenant TEXT NOT NULL,
		downstream_key TEXT NOT NULL UNIQUE,
		order_id BIGINT NOT NULL,
		payment_id BIGINT NOT NULL,
		requests INTEGER NOT NULL DEFAULT 1,
		sent_at ` + simsql.TimeColumn(d) + ` NOT NULL)`
}

// sendStatement records a receipt, or counts one more request for its
// downstream key.
func sendStatement(d string) string {
	insert := `INSERT INTO mailer_receipts
		(id, tenant, downstream_key, order_id, payment_id, requests, sent_at)
		VALUES ($1, $2, $3, $4, $5, 1, $6)`
	if d == dialect.MySQL {
		return simsql.Rebind(d, insert+` ON DUPLICATE KEY UPDATE requests = requests + 1`)
	}
	return simsql.Rebind(d, insert+` ON CONFLICT (downstream_key) DO UPDATE SET requests = mailer_receipts.requests + 1`)
}

// SendReceipt sends the receipt of a payment once per downstream key: a
// request with a key the mailer has seen is counted, not sent again.
func (s *Simulated) SendReceipt(ctx context.Context, tenant string, orderID, paymentID int, downstreamKey string) error {
	if downstreamKey == "" {
		return errors.New("mailer: a receipt needs a downstream key")
	}
	if err := timer.Sleep(ctx, s.Latency); err != nil {
		return err
	}
	id := make([]byte, 12)
	_, _ = rand.Read(id)
	_, err := s.db.ExecContext(ctx, sendStatement(s.dialect),
		"rc_"+hex.EncodeToString(id), tenant, downstreamKey, orderID, paymentID, simsql.Now(s.dialect))
	if err != nil {
		return fmt.Errorf("mailer: send receipt: %w", err)
	}
	return nil
}

// Receipts lists the receipts sent for an order of a tenant, oldest first.
func (s *Simulated) Receipts(ctx context.Context, tenant string, orderID int) ([]*Receipt, error) {
	rows, err := s.db.QueryContext(ctx, simsql.Rebind(s.dialect, `SELECT id, payment_id, order_id, requests, sent_at
		FROM mailer_receipts WHERE tenant = $1 AND order_id = $2 ORDER BY sent_at, id`), tenant, orderID)
	if err != nil {
		return nil, fmt.Errorf("mailer: list receipts: %w", err)
	}
	defer rows.Close()
	var out []*Receipt
	for rows.Next() {
		var (
			r    Receipt
			sent any
		)
		if err := rows.Scan(&r.ID, &r.PaymentID, &r.OrderID, &r.Requests, &sent); err != nil {
			return nil, err
		}
		switch v := sent.(type) {
		case time.Time:
			r.SentAt = v
		case string:
			r.SentAt, _ = time.Parse(time.RFC3339Nano, v)
		}
		out = append(out, &r)
	}
	return out, rows.Err()
}
