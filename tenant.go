package idem

import (
	"context"

	"github.com/99designs/gqlgen/graphql"

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

var _ graphql.OperationInterceptor = (*Extension)(nil)

// InterceptOperation implements graphql.OperationInterceptor: it puts the
// request's tenant (Config.Tenant) into the context of every operation,
// queries included, where the interceptors of isolated entities find it. A
// request without a tenant gets none, and those queries fail rather than
// read every tenant's rows.
func (e *Extension) InterceptOperation(ctx context.Context, next graphql.OperationHandler) graphql.ResponseHandler {
	if _, ok := tenancy.Tenant(ctx); !ok {
		if t, err := e.cfg.Tenant(ctx); err == nil && t != "" {
			ctx = tenancy.WithTenant(ctx, t)
		}
	}
	return next(ctx)
}
