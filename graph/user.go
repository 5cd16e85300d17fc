package graph

import (
	"context"
	"errors"
	"fmt"
	"net/http"
)

// UserHeader is the example's demo authentication of the caller within
// its tenant: the request header that names the user (optional; a request
// without it acts for the tenant alone). A real application derives the
// user from its own authentication, as it does the tenant.
const UserHeader = "X-User-ID"

type userKey struct{}

// WithUser returns ctx carrying user.
func WithUser(ctx context.Context, user string) context.Context {
	return context.WithValue(ctx, userKey{}, user)
}

// UserFromContext returns the user of the request, "" when it named none.
func UserFromContext(ctx context.Context) string {
	u, _ := ctx.Value(userKey{}).(string)
	return u
}

// UserMiddleware puts the X-User-ID header's user into the request's
// context. A request that sends the header twice, or a user longer than
// 255 bytes or with characters other than printable ASCII, is refused as
// a doubled X-Tenant-ID is (UNAUTHENTICATED, HTTP 401): a server that read
// one of two users could act for a user the client did not mean.
func UserMiddleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch vs := r.Header.Values(UserHeader); {
		case len(vs) > 1:
			writeUnauthenticated(w, fmt.Sprintf("the %s header was sent %d times; send it once, with one user", UserHeader, len(vs)))
			return
		case len(vs) == 1:
			if !validTenant(vs[0]) {
				writeUnauthenticated(w, UserHeader+" must be 1 to 255 characters of printable ASCII without spaces")
				return
			}
			r = r.WithContext(WithUser(r.Context(), vs[0]))
		}
		next.ServeHTTP(w, r)
	})
}

// Caller is the hook's Config.Caller: what a claim keeps so that the
// recoverer can act as the request's user again. It keeps the user's id,
// never a credential: a real application would keep its user id (and
// role), and check them again in CallerContext.
func Caller(ctx context.Context) []byte {
	if u := UserFromContext(ctx); u != "" {
		return []byte(u)
	}
	return nil
}

// CallerContext is the hook's Config.CallerContext: the context of the
// recoverer's run of a claim, as UserMiddleware and TenantMiddleware would
// have made it for the claim's tenant and user. A real application would
// check here that the user still exists and still belongs to the tenant,
// and refuse (an error) if not: the recoverer then leaves the claim to its
// client.
func CallerContext(ctx context.Context, tenant string, caller []byte) (context.Context, error) {
	ctx = WithTenant(ctx, tenant)
	if len(caller) == 0 {
		return ctx, nil
	}
	if user := string(caller); validTenant(user) {
		return WithUser(ctx, user), nil
	}
	return nil, errors.New("the claim's caller is not a valid user id")
}
