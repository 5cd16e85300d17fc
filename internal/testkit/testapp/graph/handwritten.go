package graph

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/goovo/idem/internal/testkit/testapp/ent"
)

// handwrittenTable is the hand-written flow's table of keys and responses
// (createShipmentHandwritten): what a team without the framework creates.
const handwrittenTable = `CREATE TABLE IF NOT EXISTS handwritten_keys (
	org TEXT NOT NULL,
	key TEXT NOT NULL,
	response TEXT,
	PRIMARY KEY (org, key)
)`

// CreateHandwrittenTable creates the table of createShipmentHandwritten's
// keys if it is missing.
func CreateHandwrittenTable(ctx context.Context, client *ent.Client) error {
	_, err := client.ExecContext(ctx, handwrittenTable)
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
	res, err := tx.ExecContext(ctx, `INSERT INTO handwritten_keys (org, key) VALUES ($1, $2) ON CONFLICT DO NOTHING`, org, key)
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
	if _, err := tx.ExecContext(ctx, `UPDATE handwritten_keys SET response = $3 WHERE org = $1 AND key = $2`, org, key, string(body)); err != nil {
		return nil, err
	}
	return s, tx.Commit()
}

// handwrittenReplay answers a key already taken with its stored response.
func (r *Resolver) handwrittenReplay(ctx context.Context, org, key string) (*ent.Shipment, error) {
	rows, err := r.Client.QueryContext(ctx, `SELECT response FROM handwritten_keys WHERE org = $1 AND key = $2`, org, key)
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
