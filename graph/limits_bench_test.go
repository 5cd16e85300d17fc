package graph_test

import (
	"net/http/httptest"
	"runtime/metrics"
	"sync"
	"testing"
	"time"

	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/testkit/hostile"
)

// BenchmarkWorstRequests serves each request of package hostile (the worst
// under and over each default limit) to the example server in process, on
// SQLite: ns/op is the time until the answer, B/op what was allocated
// meanwhile, peak-heap-B the most the live heap grew above where it was
// before the request (sampled every 200 µs; it depends on when the
// collector ran, B/op does not), answer-B the size of the answer. Each
// request is a document the server has not seen (Request.Fresh): the same
// text again would be answered from caches. The figures of docs/limits.md:
//
//	go test -run '^$' -bench WorstRequests -benchtime 10x ./graph/
func BenchmarkWorstRequests(b *testing.B) {
	a := newApp(b, idemtest.SQLite)
	order := a.newOrder("mallory", 100)
	h := a.Server.Config.Handler
	for _, req := range hostile.Catalogue(order) {
		b.Run(req.Name, func(b *testing.B) {
			b.ReportAllocs()
			var answer []byte
			var peak uint64
			before := liveHeap()
			for i := range b.N {
				b.StopTimer()
				r, rec := req.Fresh(i).NewHTTPRequest("/query", "mallory"), httptest.NewRecorder()
				b.StartTimer()
				peak = max(peak, peakHeap(func() { h.ServeHTTP(rec, r) }))
				status, body := rec.Code, rec.Body.Bytes()
				if got := hostile.Outcome(status, body); got != req.Want {
					b.Logf("%s, want %s: %.200s", got, req.Want, body)
				}
				answer = body
			}
			// What the server keeps after the answers (its caches): the
			// live heap after a collection, per request.
			b.ReportMetric(float64(int64(liveHeap())-int64(before))/float64(b.N), "kept-B")
			b.ReportMetric(float64(peak), "peak-heap-B")
			b.ReportMetric(float64(len(answer)), "answer-B")
		})
	}
}

// peakHeap runs f and returns how far the live heap grew above its size
// before f, sampled while f runs.
func peakHeap(f func()) uint64 {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 {
		metrics.Read(sample)
		return sample[0].Value.Uint64()
	}
	base := read()
	peak := base
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(200 * time.Microsecond)
		defer t.Stop()
		for {
			peak = max(peak, read())
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	})
	f()
	close(done)
	wg.Wait()
	peak = max(peak, read())
	return peak - base
}
