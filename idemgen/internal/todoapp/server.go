package todoapp

import (
	"context"
	"errors"
	"net/http"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/transport"

	"github.com/goovo/idem"
	"github.com/goovo/idem/idemgen/internal/todoapp/ent"
	_ "github.com/goovo/idem/idemgen/internal/todoapp/ent/runtime" // the mixin's interceptors and hooks
	"github.com/goovo/idem/idemgen/internal/todoapp/graph"
)

// TenantHeader names the caller's tenant: the application's demo
// authentication.
const TenantHeader = "X-Tenant-ID"

type tenantKey struct{}

// Tenant is the hook's tenant function: the X-Tenant-ID header's value.
func Tenant(ctx context.Context) (string, error) {
	if t, _ := ctx.Value(tenantKey{}).(string); t != "" {
		return t, nil
	}
	return "", errors.New("no tenant")
}

// NewHandler serves the application's GraphQL API with the idempotency
// hook, configured by cfg (whose Backend and Tenant it sets).
func NewHandler(client *ent.Client, cfg idem.Config) (http.Handler, error) {
	return Serve(Schema(client), client, cfg)
}

// Schema is the application's executable schema over client.
func Schema(client *ent.Client) graphql.ExecutableSchema {
	return graph.NewExecutableSchema(graph.Config{Resolvers: graph.NewResolver(client)})
}

// Serve is NewHandler with the executable schema es (a test's variant of
// Schema).
func Serve(es graphql.ExecutableSchema, client *ent.Client, cfg idem.Config) (http.Handler, error) {
	srv := handler.New(es)
	srv.AddTransport(transport.POST{})
	cfg.Backend, cfg.Tenant = client.IdempotencyBackend(), Tenant
	hook, err := idem.New(cfg)
	if err != nil {
		return nil, err
	}
	h, err := hook.Handler(srv)
	if err != nil {
		return nil, err
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if t := r.Header.Get(TenantHeader); t != "" {
			r = r.WithContext(context.WithValue(r.Context(), tenantKey{}, t))
		}
		h.ServeHTTP(w, r)
	}), nil
}
