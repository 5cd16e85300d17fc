package idem

import (
	"context"

	"github.com/goovo/idem/internal/tenancy"
)

// WithTenant returns ctx carrying tenant, the tenant whose rows the ent
// queries of isolated entities (idemschema.Mixin{Isolate: true}) are
// limited to. The hook does it for every GraphQL operation, with
// Config.Tenant; code outside a GraphQL request (a job, a test) does it
// itself. Code that must see every tenant's rows uses
// idemschema.AllTenants instead.
func WithTenant(ctx context.Context, tenant string) context.Context {
	return tenancy.WithTenant(ctx, tenant)
}

// TenantFromContext returns the tenant WithTenant put into ctx.
func TenantFromContext(ctx context.Context) (string, bool) {
	return tenancy.Tenant(ctx)
}
