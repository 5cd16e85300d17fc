package idembackend

import (
	"context"
	"time"

	"entgo.io/ent/dialect"

	"github.com/goovo/idem/internal/claimctx"
)

// Claim is the claim of an idempotent mutation: what a record table's
// Insert writes into the row, and what the generated ent.Claimed<T> reads
// back while the resolver runs.
type Claim struct {
	// Tenant is the scope of the key.
	Tenant string
	// Key is the client's idempotency key ("" for a call without one while
	// the key is optional).
	Key string
	// Fingerprint identifies the request; a retry must match it.
	Fingerprint string
	// Attempt is the fencing token: 1 for the first claim, bumped by every
	// takeover.
	Attempt int
	// Mode is the mutation's execution mode, "LEASE" or "ATOMIC".
	Mode string
	// ClaimedAt and LeaseExpiresAt are database times.
	ClaimedAt      time.Time
	LeaseExpiresAt time.Time
	// Operation is what the recoverer runs again if the client never comes
	// back; nil when the mutation opted out of recovery, and in atomic
	// mode, whose claim never commits without its result.
	Operation []byte

	row any
}

// SetRow records the row the claim inserted, so that the resolver gets it
// without reading it back.
func (c *Claim) SetRow(row any) { c.row = row }

// Row returns the row SetRow recorded: nil after a takeover, where the row
// was inserted by an earlier attempt.
func (c *Claim) Row() any { return c.row }

// ClaimFromContext returns the claim of the idempotent mutation running in
// ctx, or nil outside one. Only the hook puts a claim in a context.
func ClaimFromContext(ctx context.Context) *Claim { return claimctx.Claim[Claim](ctx) }

// WithDriverTx returns ctx carrying tx, the ent driver's transaction under
// the one Backend.BeginTx began (a *pgxdriver.Tx on pgx, an *entsql.Tx on
// database/sql). Generated code calls it, so that code writing in the
// attempt's transaction through another library than ent (idemoutbox's
// River jobs) reaches it.
func WithDriverTx(ctx context.Context, tx dialect.Tx) context.Context {
	return claimctx.WithDriverTx(ctx, tx)
}
