package extension

import (
	"context"

	"github.com/99designs/gqlgen/graphql"

	"github.com/goovo/idem/internal/tenancy"
)

// Tenant puts the request's tenant into the context of every operation,
// queries included, where the interceptors of isolated entities
// (idemschema) find it. A request without a tenant gets none, and those
// queries fail rather than read every tenant's rows. A context that holds
// a tenant already (the recoverer's runs) keeps it.
type Tenant struct {
	// Of is the request's tenant (idem.Config.Tenant).
	Of func(ctx context.Context) (string, error)
}

var (
	_ graphql.HandlerExtension     = Tenant{}
	_ graphql.OperationInterceptor = Tenant{}
)

// ExtensionName implements graphql.HandlerExtension.
func (Tenant) ExtensionName() string { return "Tenant" }

// Validate implements graphql.HandlerExtension.
func (t Tenant) Validate(graphql.ExecutableSchema) error { return nil }

// InterceptOperation implements graphql.OperationInterceptor.
func (t Tenant) InterceptOperation(ctx context.Context, next graphql.OperationHandler) graphql.ResponseHandler {
	if _, ok := tenancy.Tenant(ctx); !ok {
		if id, err := t.Of(ctx); err == nil && id != "" {
			ctx = tenancy.WithTenant(ctx, id)
		}
	}
	return next(ctx)
}
