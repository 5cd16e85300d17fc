package graph

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"entgo.io/ent/dialect"

	"github.com/goovo/idem/internal/testkit/testapp/ent"
)

// handwrittenSQL is the hand-written flow's SQL (createShipmentHandwritten):
// what a team without the framework writes, on PostgreSQL and SQLite, and
// on MySQL (MariaDB), which has no ON CONFLICT, indexes no TEXT and reads
// positional placeholders only.
type handwrittenSQL struct{ table, claim, store, replay string }

var (
	handwrittenStandard = handwrittenSQL{
		table: `CREATE TABLE IF NOT EXISTS handwritten_keys (
			org TEXT NOT NULL,
			idem_key TEXT NOT NULL,
			response TEXT,
			PRIMARY KEY (org, idem_key)
		)`,
		claim:  `INSERT INTO handwritten_keys (org, idem_key) VALUES ($1, $2) ON CONFLICT DO NOTHING`,
		store:  `UPDATE handwritten_keys SET response = $1 WHERE org = $2 AND idem_key = $3`,
		replay: `SELECT response FROM handwritten_keys WHERE org = $1 AND idem_key = $2`,
	}
	handwrittenMySQL = handwrittenSQL{
		table: `CREATE TABLE IF NOT EXISTS handwritten_keys (
			org VARCHAR(255) NOT NULL,
			idem_key VARCHAR(255) NOT NULL,
			response LONGTEXT,
			PRIMARY KEY (org, idem_key)
		)`,
		claim:  `INSERT IGNORE INTO handwritten_keys (org, idem_key) VALUES (?, ?)`,
		store:  `UPDATE handwritten_keys SET response = ? WHERE org = ? AND idem_key = ?`,
		replay: `SELECT response FROM handwritten_keys WHERE org = ? AND idem_key = ?`,
	}
)

// handwrittenOf returns the hand-written flow's SQL for the dialect of
// client's driver.
func handwrittenOf(client *ent.Client) handwrittenSQL {
	if client.IdempotencyBackend().Dialect() == dialect.MySQL {
		return handwrittenMySQL
	}
	return handwrittenStandard
}

// CreateHandwrittenTable creates the table of createShipmentHandwritten's
// keys if it is missing.
func CreateHandwrittenTable(ctx context.Context, client *ent.Client) error {
	_, err := client.ExecContext(ctx, handwrittenOf(client).table)
	return err
}

// errHandwrittenInProgress answers a key whose first request has not
// committed: the hand-written flow cannot tell a live request from a dead one.
var errHandwrittenInProgress = errors.New("a request with this key is in progress")

// createHandwritten is createShipmentHandwritten's resolver: the article's
// flow, one statement per step, in one transaction.
func (r *Resolver) createHandwritten(ctx context.Context, key string, input ent.CreateShipmentInput) (_ *ent.Shipment, err error) {
	org, err := OrgFromContext(ctx)
	if err != nil {
		return nil, err
	}
	tx, err := r.Client.Tx(ctx)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	q := handwrittenOf(r.Client)
	res, err := tx.ExecContext(ctx, q.claim, org, key)
	if err != nil {
		return nil, err
	}
	if n, err := res.RowsAffected(); err != nil {
		return nil, err
	} else if n == 0 {
		// The key is taken: end this transaction and answer what was stored.
		_ = tx.Rollback()
		return r.handwrittenReplay(ctx, org, key)
	}
	s, err := tx.Shipment.Create().SetInput(input).SetOrg(org).Save(ctx)
	if err != nil {
		return nil, err
	}
	body, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	if _, err := tx.ExecContext(ctx, q.store, string(body), org, key); err != nil {
		return nil, err
	}
	return s, tx.Commit()
}

// handwrittenReplay answers a key already taken with its stored response.
func (r *Resolver) handwrittenReplay(ctx context.Context, org, key string) (*ent.Shipment, error) {
	rows, err := r.Client.QueryContext(ctx, handwrittenOf(r.Client).replay, org, key)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var body sql.NullString
	if rows.Next() {
		if err := rows.Scan(&body); err != nil {
			return nil, err
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if !body.Valid {
		return nil, errHandwrittenInProgress
	}
	var s ent.Shipment
	if err := json.Unmarshal([]byte(body.String), &s); err != nil {
		return nil, fmt.Errorf("stored response: %w", err)
	}
	return &s, nil
}

// createOptIn is the resolver of createShipmentOptIn and
// createShipmentOptInLease: a hand-written mutation's create, through the
// client the hook gives the request (ent.FromContext: its transaction), so
// that the shipment commits with the result.
func (r *Resolver) createOptIn(ctx context.Context, input ent.CreateShipmentInput) (*ent.Shipment, error) {
	org, err := OrgFromContext(ctx)
	if err != nil {
		return nil, err
	}
	if r.Hook != nil {
		if err := r.Hook(ctx, nil); err != nil {
			return nil, err
		}
	}
	return ent.FromContext(ctx).Shipment.Create().SetInput(input).SetOrg(org).Save(ctx)
}
