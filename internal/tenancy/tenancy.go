// Package tenancy carries, in a request's context, what the ent side of the
// framework (idemschema's interceptors and hooks) needs to know of the
// request: its tenant and the idempotency claim it holds. The hook puts
// them there; this leaf package keeps idemschema, which ent's code
// generator loads, free of the hook's runtime dependencies.
package tenancy

import (
	"context"
	"sync/atomic"
)

type (
	tenantKey     struct{}
	allTenantsKey struct{}
	claimKey      struct{}
	claimInsert   struct{}
)

// WithTenant returns ctx carrying tenant.
func WithTenant(ctx context.Context, tenant string) context.Context {
	return context.WithValue(ctx, tenantKey{}, tenant)
}

// Tenant returns the tenant in ctx; ok is false when there is none.
func Tenant(ctx context.Context) (tenant string, ok bool) {
	tenant, _ = ctx.Value(tenantKey{}).(string)
	return tenant, tenant != ""
}

// WithAllTenants returns ctx in which isolated entities are not filtered by
// tenant.
func WithAllTenants(ctx context.Context) context.Context {
	return context.WithValue(ctx, allTenantsKey{}, true)
}

// AllTenants reports whether ctx was made by WithAllTenants.
func AllTenants(ctx context.Context) bool {
	v, _ := ctx.Value(allTenantsKey{}).(bool)
	return v
}

// Claim is what the mixin's interceptor and hook need of the claim an
// idempotent mutation holds: which row is the caller's own, and which
// entity's rows the claim inserts.
type Claim struct {
	// Key is "" in a call without a key while the key is optional.
	Table, Tenant, Key string
	// Entity is the ent type whose row the claim inserted ("" when it
	// inserted none: records of an idemschema.Record entity).
	Entity string
	// SecondRow is set by the mixin's hook when it refuses a create of
	// Entity that is not the claim's own insert: the resolver made a row of
	// its own instead of using the claimed one, which the hook then refuses
	// whatever the resolver did with the error.
	SecondRow *atomic.Bool
}

// WithClaim returns ctx carrying c.
func WithClaim(ctx context.Context, c Claim) context.Context {
	return context.WithValue(ctx, claimKey{}, c)
}

// ClaimOf returns the claim in ctx; ok is false outside an idempotent
// mutation.
func ClaimOf(ctx context.Context) (c Claim, ok bool) {
	c, ok = ctx.Value(claimKey{}).(Claim)
	return c, ok
}

// WithClaimInsert returns ctx for the claim's own insert of its row, the
// one create of the claim's entity that the mixin's hook lets through.
func WithClaimInsert(ctx context.Context) context.Context {
	return context.WithValue(ctx, claimInsert{}, true)
}

// IsClaimInsert reports whether ctx was made by WithClaimInsert.
func IsClaimInsert(ctx context.Context) bool {
	v, _ := ctx.Value(claimInsert{}).(bool)
	return v
}
