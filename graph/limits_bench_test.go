package graph_test

import (
	"net/http/httptest"
	"testing"

	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/testkit/hostile"
)

// BenchmarkWorstRequests serves each request of package hostile (the worst
// under and over each default limit) to the example server in process, on
// SQLite: ns/op is the time until the answer, B/op what was allocated
// meanwhile (more than the peak of the heap it needs), answer-B the size
// of the answer. The figures of docs/limits.md:
//
//	go test -run '^$' -bench WorstRequests -benchtime 20x ./graph/
func BenchmarkWorstRequests(b *testing.B) {
	a := newApp(b, idemtest.SQLite)
	order := a.newOrder("mallory", 100)
	h := a.Server.Config.Handler
	for _, req := range hostile.Catalogue(order) {
		b.Run(req.Name, func(b *testing.B) {
			b.ReportAllocs()
			var answer []byte
			for b.Loop() {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req.NewHTTPRequest("/query", "mallory"))
				status, body := rec.Code, rec.Body.Bytes()
				if got := hostile.Outcome(status, body); got != req.Want {
					b.Logf("%s, want %s: %.200s", got, req.Want, body)
				}
				answer = body
			}
			b.ReportMetric(float64(len(answer)), "answer-B")
		})
	}
}
