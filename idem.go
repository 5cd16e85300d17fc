package idem

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/goovo/idem/idembackend"
	"github.com/goovo/idem/internal/idemkey"
	"github.com/goovo/idem/internal/record"
)

// MaxKeyLength is the longest idempotency key accepted, in bytes: 255, the
// length of the key column.
const MaxKeyLength = record.MaxKeyLength

// ValidateKey checks a key the way the hook does before any database work:
// 1 to MaxKeyLength characters of printable ASCII. Its error is an
// *idemcode.Error of code IDEMPOTENCY_KEY_INVALID (ErrKeyInvalid).
func ValidateKey(key string) error { return idemkey.Validate(key) }

// Mode selects how a mutation's claim and its writes are committed.
type Mode string

const (
	// ModeLease commits the pending claim on its own, runs the resolver, and
	// commits its writes with the result only while the attempt still owns
	// the claim. Safe for work that leaves the database. The default.
	ModeLease Mode = "LEASE"
	// ModeAtomic claims, runs and stores the result in one transaction. A
	// concurrent duplicate waits for it and replays its result. For
	// mutations whose effects live in this database only.
	ModeAtomic Mode = "ATOMIC"
)

// Claim is what a resolver may read of the claim its idempotent mutation
// holds (ClaimFromContext). The key itself is KeyFromContext's: pass it to
// every system the resolver calls outside the database.
type Claim struct {
	// Tenant is the scope of the key, from Config.Tenant.
	Tenant string
	// Key is the client's idempotency key.
	Key string
	// Attempt is the fencing token: 1 for the first claim, bumped by every
	// takeover. Only the current attempt can store a result; a resolver that
	// finds Attempt > 1 runs after an attempt that may have done part of
	// the work (the example's payment looks for the provider's charge).
	Attempt int
	// Mode is the mutation's execution mode.
	Mode Mode
	// ClaimedAt and LeaseExpiresAt are database times.
	ClaimedAt      time.Time
	LeaseExpiresAt time.Time
}

// ClaimFromContext returns the claim of the idempotent mutation running in
// ctx, or nil outside one.
func ClaimFromContext(ctx context.Context) *Claim {
	c := idembackend.ClaimFromContext(ctx)
	if c == nil {
		return nil
	}
	return &Claim{Tenant: c.Tenant, Key: c.Key, Attempt: c.Attempt, Mode: Mode(c.Mode),
		ClaimedAt: c.ClaimedAt, LeaseExpiresAt: c.LeaseExpiresAt}
}

// KeyFromContext returns the idempotency key of the mutation running in ctx;
// ok is false outside an idempotent mutation and in a call that sent no key
// while the key was optional (see idemgen's rollout).
// Forward it to any system the resolver calls outside the database (a payment
// provider, an email service) so that it can deduplicate the call: after a
// crash the hook runs the mutation again with the same key, and only the
// downstream system can tell that its part was already done.
func KeyFromContext(ctx context.Context) (string, bool) {
	if c := idembackend.ClaimFromContext(ctx); c != nil && c.Key != "" {
		return c.Key, true
	}
	return "", false
}

// MarshalGQL implements graphql.Marshaler for the IdempotencyMode enum.
func (m Mode) MarshalGQL(w io.Writer) { _, _ = io.WriteString(w, strconv.Quote(string(m))) }

// UnmarshalGQL implements graphql.Unmarshaler for the IdempotencyMode enum.
func (m *Mode) UnmarshalGQL(v any) error {
	s, ok := v.(string)
	if !ok || (Mode(s) != ModeLease && Mode(s) != ModeAtomic) {
		return fmt.Errorf("IdempotencyMode must be %s or %s", ModeLease, ModeAtomic)
	}
	*m = Mode(s)
	return nil
}

// CommitsAlone returns ctx for writes that must commit on their own while
// an idempotent mutation's resolver runs, whatever becomes of the mutation:
// an audit row of the attempt, say. Inside an idempotent mutation, a write
// through the application's ent client (r.client.T.Create()…Save(ctx)) or
// a transaction of the resolver's own (r.client.Tx(ctx) … Commit()) is
// otherwise refused (ErrWriteOutsideClaim): it would commit whether or not
// the mutation's result does. With CommitsAlone the guarantee is given up
// for those writes: they are not rolled back with the mutation, and a retry
// after a crash, or the recoverer, makes them again. Write through
// ent.FromContext(ctx) for everything that must happen once.
func CommitsAlone(ctx context.Context) context.Context {
	return idembackend.WithoutWriteGuard(ctx)
}
