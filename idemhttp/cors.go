package idemhttp

import (
	"net/http"

	"github.com/goovo/idem/idemcode"
	"slices"
	"strings"
)

// CORS lets pages of other origins call a GraphQL endpoint from a browser
// with the idempotency headers: a page on https://shop.example calling
// https://api.example/query sends a preflight first (its Idempotency-Key
// and Content-Type: application/json make the request not "simple"), and
// reads the answer's Idempotent-Replayed only if the server exposes it.
// Without it the preflight is refused and the browser's fetch fails the
// way a lost connection does: a client retries it, and then reports that
// the mutation may or may not have run.
type CORS struct {
	// Origins allowed, as a browser sends them ("https://shop.example",
	// scheme, host and port, no path); "*" allows any origin.
	Origins []string
	// Headers a request may carry besides Content-Type, Accept,
	// Idempotency-Key and Idempotency-Retry, which are always allowed: the
	// application's own, such as Authorization or a tenant's header.
	AllowHeaders []string
	// Whether requests may carry cookies and HTTP authentication
	// (Access-Control-Allow-Credentials); the page's fetch must also ask
	// for it (credentials: "include").
	AllowCredentials bool
}

// ExposedHeaders are the response headers a page of another origin may
// read: the protocol's and Retry-After.
var ExposedHeaders = []string{idemcode.HeaderReplayed, idemcode.HeaderKey, "Retry-After"}

// Handler wraps next: a preflight (OPTIONS with Access-Control-Request-Method)
// from an allowed origin is answered 204 with the methods (GET, POST) and
// headers allowed; one from another origin 403, before next sees it. A
// request from an allowed origin goes on to next with
// Access-Control-Allow-Origin and Access-Control-Expose-Headers set on its
// response. Requests without an Origin (not from a browser page, or from
// the same origin) pass through untouched.
func (c CORS) Handler(next http.Handler) http.Handler {
	allowHeaders := strings.Join(append([]string{"Content-Type", "Accept", idemcode.HeaderKey, idemcode.HeaderRetry}, c.AllowHeaders...), ", ")
	exposed := strings.Join(ExposedHeaders, ", ")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if origin == "" {
			next.ServeHTTP(w, r)
			return
		}
		h := w.Header()
		h.Add("Vary", "Origin")
		allowed := slices.Contains(c.Origins, origin) || slices.Contains(c.Origins, "*")
		preflight := r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != ""
		if preflight {
			h.Add("Vary", "Access-Control-Request-Method")
			h.Add("Vary", "Access-Control-Request-Headers")
			if !allowed {
				http.Error(w, "origin "+origin+" is not allowed to call this server (CORS)", http.StatusForbidden)
				return
			}
			c.allowOrigin(h, origin)
			h.Set("Access-Control-Allow-Methods", "GET, POST")
			h.Set("Access-Control-Allow-Headers", allowHeaders)
			h.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		if allowed {
			c.allowOrigin(h, origin)
			h.Set("Access-Control-Expose-Headers", exposed)
		}
		next.ServeHTTP(w, r)
	})
}

func (c CORS) allowOrigin(h http.Header, origin string) {
	// The origin itself rather than "*": a credentialed request needs it,
	// and Vary: Origin keeps caches from serving one origin's answer to
	// another.
	h.Set("Access-Control-Allow-Origin", origin)
	if c.AllowCredentials {
		h.Set("Access-Control-Allow-Credentials", "true")
	}
}
