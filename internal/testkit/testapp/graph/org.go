package graph

import (
	"context"
	"errors"
	"net/http"
)

// OrgHeader is the request header that carries the organisation: the
// test application's demo authentication.
const OrgHeader = "X-Org"

type orgKey struct{}

// OrgFromContext is the test application's tenant function.
func OrgFromContext(ctx context.Context) (string, error) {
	if org, _ := ctx.Value(orgKey{}).(string); org != "" {
		return org, nil
	}
	return "", errors.New("no organisation")
}

// OrgContext returns ctx carrying org: the inverse of OrgFromContext, the
// hook's Config.TenantContext.
func OrgContext(ctx context.Context, org string) context.Context {
	return context.WithValue(ctx, orgKey{}, org)
}

// WithOrg reads the OrgHeader into the request's context.
func WithOrg(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), orgKey{}, r.Header.Get(OrgHeader))))
	})
}
