package testapp_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/goovo/idem"
	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/testkit/testapp"
)

// BenchmarkPath measures one variant of BenchmarkCreate alone, one request
// per op, for a CPU profile of one path (-cpuprofile, -memprofile) and its
// allocations (-benchmem): plain (no idempotency) and replay (a retry of a
// stored lease-mode key), on pgx.
func BenchmarkPath(b *testing.B) {
	be := testapp.NewBench(b, idemtest.Postgres, idem.Config{})
	h := be.Server.Config.Handler
	mutation := func(field, key string) string {
		keyArg := ""
		if key != "" {
			keyArg = fmt.Sprintf(`idempotencyKey: \"%s\", `, key)
		}
		return fmt.Sprintf(`{"query":"mutation { %s(%sinput: {destination: \"Lyon\", weightGrams: 900}) { id destination weightGrams } }"}`, field, keyArg)
	}
	send := func(b *testing.B, body string) {
		req := httptest.NewRequest(http.MethodPost, "/query", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Org", "bench")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK || strings.Contains(rec.Body.String(), `"errors"`) {
			b.Fatalf("%s -> %s", body, rec.Body.String())
		}
	}
	send(b, mutation("createShipmentLease", "replayed-key"))
	for _, v := range []struct{ name, body string }{
		{"plain", mutation("createShipmentPlain", "")},
		{"replay", mutation("createShipmentLease", "replayed-key")},
	} {
		b.Run(v.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				send(b, v.body)
			}
		})
	}
}
