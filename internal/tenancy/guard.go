package tenancy

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"entgo.io/ent/dialect"
)

// ErrWriteOutsideClaim is idembackend.ErrWriteOutsideClaim, here so that
// the SQLite driver (idemdb), below idembackend, returns it too.
var ErrWriteOutsideClaim = errors.New("idem: an idempotent mutation's resolver wrote outside its claim's transaction")

// Guard refuses, while the resolver of an idempotent mutation runs, the
// writes that do not go through the claim's transaction: the engine puts
// one in the resolver's context (WithGuard), the hook idemgen generates
// checks every ent mutation against it (Check), and the SQLite driver
// refuses a transaction of the resolver's own (RefuseTx).
type Guard struct {
	tx       dialect.Tx
	resolver string
	// claimEntity is the ent type whose row the claim inserted; a create
	// of it is left to the mixin's hook (idemschema.ErrSecondRow), which
	// says more.
	claimEntity string
	refused     atomic.Pointer[string]
}

// NewGuard returns the guard of a resolver (named as gqlgen names its Go
// method) whose writes belong in the driver transaction tx; claimEntity is
// the ent type whose row the claim inserted ("" for none).
func NewGuard(tx dialect.Tx, resolver, claimEntity string) *Guard {
	return &Guard{tx: tx, resolver: resolver, claimEntity: claimEntity}
}

// Check returns nil for a mutation of entity (op as ent prints it:
// "OpCreate") in the claim's transaction: tx, the driver transaction of
// the mutation's client, is the claim's. Otherwise (tx is nil outside a
// transaction, or another transaction) it records the refusal and returns
// an error that wraps ErrWriteOutsideClaim, naming the resolver and the
// fix; pkg is the ent package's name, as the resolver calls it.
func (g *Guard) Check(pkg, entity, op string, tx dialect.Tx) error {
	if tx != nil && tx == g.tx {
		return nil
	}
	if op == "OpCreate" && entity == g.claimEntity {
		return nil
	}
	verb := map[string]string{"OpCreate": "a create", "OpUpdate": "an update", "OpUpdateOne": "an update",
		"OpDelete": "a delete", "OpDeleteOne": "a delete"}[op]
	if verb == "" {
		verb = "a write"
	}
	where := "through the non-transactional client"
	if tx != nil {
		where = "in a transaction of its own"
	}
	return g.refuse(fmt.Sprintf("%s of %s outside the claim's transaction (%s)", verb, entity, where), pkg)
}

// RefuseTx records and returns the refusal of a transaction the resolver
// opens on SQLite: the claim's transaction holds the database's one
// writer's turn until the mutation ends, so another would only wait for it
// and fail.
func (g *Guard) RefuseTx() error {
	return g.refuse("a transaction of its own on SQLite, where it would wait for the claim's transaction (the one writer) until the busy timeout", "ent")
}

func (g *Guard) refuse(what, pkg string) error {
	g.refused.CompareAndSwap(nil, &what)
	return fmt.Errorf("%w: %s made %s; it would commit whether or not the mutation does. Write through %s.FromContext(ctx), or, for a write that must commit on its own whatever becomes of the mutation (and may be made again by a retry), pass idem.CommitsAlone(ctx)",
		ErrWriteOutsideClaim, g.resolver, what, pkg)
}

// Refused returns the first write refused, described for the log; "" when
// none was (or g is nil).
func (g *Guard) Refused() string {
	if g == nil {
		return ""
	}
	if w := g.refused.Load(); w != nil {
		return *w
	}
	return ""
}

type guardKey struct{}

// WithGuard returns ctx carrying g.
func WithGuard(ctx context.Context, g *Guard) context.Context {
	return context.WithValue(ctx, guardKey{}, g)
}

// WithoutGuard returns ctx in which no guard checks the writes.
func WithoutGuard(ctx context.Context) context.Context {
	return context.WithValue(ctx, guardKey{}, (*Guard)(nil))
}

// GuardOf returns the guard in ctx, or nil outside a resolver of an
// idempotent mutation and under WithoutGuard.
func GuardOf(ctx context.Context) *Guard {
	g, _ := ctx.Value(guardKey{}).(*Guard)
	return g
}
