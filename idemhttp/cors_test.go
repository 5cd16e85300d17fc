package idemhttp_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/goovo/idem/idemcode"
	"github.com/goovo/idem/idemhttp"
)

// A page of an allowed origin may send the idempotency headers (its
// preflight is answered) and read Idempotent-Replayed; another origin's
// preflight is refused before the handler; a request without Origin is
// untouched. (clients/js's browser tests call the example server
// cross-origin from Chromium.)
func TestCORS(t *testing.T) {
	reached := 0
	h := idemhttp.CORS{Origins: []string{"http://shop.example"}, AllowHeaders: []string{"X-Tenant-ID"}}.Handler(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			reached++
			w.Header().Set(idemcode.HeaderReplayed, "true")
		}))
	do := func(method, origin string, header map[string]string) *http.Response {
		r := httptest.NewRequest(method, "/query", nil)
		if origin != "" {
			r.Header.Set("Origin", origin)
		}
		for k, v := range header {
			r.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Result()
	}
	preflight := map[string]string{"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type, idempotency-key, x-tenant-id"}

	res := do(http.MethodOptions, "http://shop.example", preflight)
	if res.StatusCode != http.StatusNoContent || res.Header.Get("Access-Control-Allow-Origin") != "http://shop.example" {
		t.Fatalf("preflight of an allowed origin: %d %v", res.StatusCode, res.Header)
	}
	for _, want := range []string{"Idempotency-Key", "Idempotency-Retry", "Content-Type", "X-Tenant-ID"} {
		if !strings.Contains(res.Header.Get("Access-Control-Allow-Headers"), want) {
			t.Errorf("Access-Control-Allow-Headers %q lacks %s", res.Header.Get("Access-Control-Allow-Headers"), want)
		}
	}
	if res := do(http.MethodOptions, "http://evil.example", preflight); res.StatusCode != http.StatusForbidden || res.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("preflight of another origin: %d %v", res.StatusCode, res.Header)
	}
	if reached != 0 {
		t.Fatalf("a preflight reached the handler %d times", reached)
	}

	res = do(http.MethodPost, "http://shop.example", nil)
	if res.Header.Get("Access-Control-Allow-Origin") != "http://shop.example" || !strings.Contains(res.Header.Get("Access-Control-Expose-Headers"), idemcode.HeaderReplayed) {
		t.Fatalf("request of an allowed origin: %v", res.Header)
	}
	if res := do(http.MethodPost, "http://evil.example", nil); res.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("request of another origin is allowed: %v", res.Header)
	}
	if res := do(http.MethodPost, "", nil); res.Header.Get("Access-Control-Allow-Origin") != "" || res.Header.Get("Vary") != "" {
		t.Fatalf("request without Origin was changed: %v", res.Header)
	}
	if reached != 3 {
		t.Fatalf("the handler was reached %d times, want 3", reached)
	}
}
