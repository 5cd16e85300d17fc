package graph

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/goovo/idem/idemcode"
)

// TenantHeader is the example's demo authentication: the request header
// that names the caller's tenant. A real application derives the tenant from
// its own authentication; the hook takes any function.
const TenantHeader = "X-Tenant-ID"

type tenantKey struct{}

// WithTenant returns ctx carrying tenant.
func WithTenant(ctx context.Context, tenant string) context.Context {
	return context.WithValue(ctx, tenantKey{}, tenant)
}

// ErrNoTenant is returned by TenantFromContext for anonymous requests.
var ErrNoTenant = errors.New("no tenant: send the " + TenantHeader + " header")

// TenantFromContext returns the tenant of the request: the function the
// idempotency hook is configured with.
func TenantFromContext(ctx context.Context) (string, error) {
	t, _ := ctx.Value(tenantKey{}).(string)
	if t == "" {
		return "", ErrNoTenant
	}
	return t, nil
}

// TenantMiddleware puts the X-Tenant-ID header's tenant into the request's
// context. Tenants longer than 255 bytes or with characters other than
// printable ASCII are ignored (the request is anonymous). The header sent
// more than once refuses the request before anything runs: HTTP 401 with a
// GraphQL error of code UNAUTHENTICATED, as idem refuses a doubled
// Idempotency-Key. Which of two tenants the caller meant cannot be told,
// and taking the first (what http.Header.Get does) lets whoever added the
// other line, a client bug or a proxy, decide whose data is read and
// written.
func TenantMiddleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		vs := r.Header.Values(TenantHeader)
		if len(vs) > 1 {
			writeUnauthenticated(w, fmt.Sprintf("the %s header was sent %d times; send it once, with one tenant", TenantHeader, len(vs)))
			return
		}
		if len(vs) == 1 && validTenant(vs[0]) {
			r = r.WithContext(WithTenant(r.Context(), vs[0]))
		}
		next.ServeHTTP(w, r)
	})
}

// writeUnauthenticated answers a request refused by the authentication:
// HTTP 401, with a GraphQL error of code UNAUTHENTICATED.
func writeUnauthenticated(w http.ResponseWriter, message string) {
	body, _ := json.Marshal(&graphql.Response{Errors: gqlerror.List{{
		Message:    message,
		Extensions: map[string]any{"code": string(idemcode.Unauthenticated)},
	}}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusUnauthorized)
	_, _ = w.Write(body)
}

func validTenant(t string) bool {
	if t == "" || len(t) > 255 {
		return false
	}
	for i := 0; i < len(t); i++ {
		if t[i] < 0x21 || t[i] > 0x7e {
			return false
		}
	}
	return true
}
