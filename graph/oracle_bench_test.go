package graph_test

import (
	"slices"
	"testing"
	"time"

	"github.com/goovo/idem/idemtest"
)

// BenchmarkIDOracle measures what tenant B can learn of tenant A's ids
// from timing alone: the median time of the same request about an id of
// A's and about an id that does not exist, for the query order(id:) and
// for the mutations that refer to a row (createPayment, refundPayment,
// refused at the claim either way). The probes of one round are sent in a
// rotating order, so that drift in the machine's load falls on every probe
// alike. docs/contract.md quotes the figures.
//
//	go test -run '^$' -bench IDOracle -benchtime 2000x ./graph/
func BenchmarkIDOracle(b *testing.B) {
	for _, backend := range idemtest.RiverKinds() {
		b.Run(string(backend), func(b *testing.B) {
			a := newApp(b, backend)
			orderOfA := a.newOrder("tenant-a", 100)
			paymentOfA := a.paidPayment("tenant-a", 100)
			const missing = "987654"
			const order = `query($id: ID!) { order(id: $id) { id paid } }`
			probes := []struct {
				name, query string
				vars        map[string]any
			}{
				{"order-of-A", order, map[string]any{"id": orderOfA}},
				{"order-missing", order, map[string]any{"id": missing}},
				{"pay-order-of-A", createPayment, map[string]any{"key": "probe", "order": orderOfA, "amount": 100}},
				{"pay-order-missing", createPayment, map[string]any{"key": "probe", "order": missing, "amount": 100}},
				{"refund-payment-of-A", refundPayment, map[string]any{"key": "probe", "payment": paymentOfA, "amount": 1}},
				{"refund-payment-missing", refundPayment, map[string]any{"key": "probe", "payment": missing, "amount": 1}},
			}
			times := make([][]time.Duration, len(probes))
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				for j := range probes {
					k := (i + j) % len(probes)
					start := time.Now()
					a.do("tenant-b", probes[k].query, probes[k].vars)
					times[k] = append(times[k], time.Since(start))
				}
			}
			b.StopTimer()
			for k, p := range probes {
				slices.Sort(times[k])
				b.ReportMetric(float64(times[k][len(times[k])/2].Microseconds()), "µs-median-"+p.name)
			}
		})
	}
}
