// Package tenancy carries, in a request's context, what the ent side of the
// framework (idemschema's interceptors and hooks) needs to know of the
// request: its tenant and the idempotency claim it holds. The hook puts
// them there; this leaf package keeps idemschema, which ent's code
// generator loads, free of the hook's runtime dependencies.
package tenancy

import "context"

type (
	tenantKey     struct{}
	allTenantsKey struct{}
	claimKey      struct{}
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

// Claim is what the mixin's interceptor needs of the claim an idempotent
// mutation holds: which row is the caller's own.
type Claim struct {
	Table, Tenant, Key string
}

// WithClaim returns ctx carrying c.
func WithClaim(ctx context.Context, c Claim) context.Context {
	return context.WithValue(ctx, claimKey{}, c)
}

// ClaimOf returns the claim in ctx; ok is false outside a keyed idempotent
// mutation.
func ClaimOf(ctx context.Context) (c Claim, ok bool) {
	c, ok = ctx.Value(claimKey{}).(Claim)
	return c, ok
}
