// Package claimctx carries, in a resolver's context, what only the library
// may put there: the claim of the idempotent mutation running (read through
// idembackend.ClaimFromContext and idem.KeyFromContext, which trust it) and
// the driver's transaction of its attempt. Its keys are unexported and the
// package internal, so that no caller outside the module can forge a claim.
package claimctx

import (
	"context"

	"entgo.io/ent/dialect"
)

type claimKey struct{}

// WithClaim returns ctx carrying c: the engine hands the claim to the
// resolver's context with it.
func WithClaim[C any](ctx context.Context, c *C) context.Context {
	return context.WithValue(ctx, claimKey{}, c)
}

// Claim returns the claim WithClaim put in ctx, or nil.
func Claim[C any](ctx context.Context) *C {
	c, _ := ctx.Value(claimKey{}).(*C)
	return c
}

type driverTxKey struct{}

// WithDriverTx returns ctx carrying tx, the ent driver's transaction under
// the one idembackend.Backend.BeginTx began (generated code calls
// idembackend.WithDriverTx, which calls this).
func WithDriverTx(ctx context.Context, tx dialect.Tx) context.Context {
	return context.WithValue(ctx, driverTxKey{}, tx)
}

// DriverTx returns the driver's transaction WithDriverTx put in ctx, or
// nil.
func DriverTx(ctx context.Context) dialect.Tx {
	tx, _ := ctx.Value(driverTxKey{}).(dialect.Tx)
	return tx
}
