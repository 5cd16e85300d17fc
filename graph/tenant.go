package graph

import (
	"context"
	"errors"
	"net/http"
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
// printable ASCII are ignored (the request is anonymous).
func TenantMiddleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if t := r.Header.Get(TenantHeader); validTenant(t) {
			r = r.WithContext(WithTenant(r.Context(), t))
		}
		next.ServeHTTP(w, r)
	})
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
