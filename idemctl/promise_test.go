package idemctl_test

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/goovo/idem"
	"github.com/goovo/idem/idemctl"
	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/testkit"
)

// A record's expiry is fixed when its answer is given: an idemctl started
// with a shorter retention than the server that answered (issue 31:
// `idemctl -retention 10s sweep` archived 29,985 records promised 24 h)
// archives none of them before their expiresAt, and says that its
// settings disagree with the records. Once the promise ends it archives
// them.
func TestSweepHonoursThePromisedExpiry(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		be := newBench(t, b)
		keys := []string{"a", "b", "c"}
		for _, k := range keys {
			r := be.ship("org-1", k)
			if r.Idempotency["createShipment"].ExpiresAt == "" {
				t.Fatalf("no expiresAt in the answer: %s", r.Body)
			}
		}
		be.Clock.Advance(time.Minute)

		var doc sweepDoc
		be.run("-json", "-retention", "10s", "sweep").ok(t).json(t, &doc)
		promised := 0
		for _, ts := range doc.Tables {
			promised += ts.Promised
		}
		if doc.Archived != 0 || promised != len(keys) {
			t.Fatalf("-retention 10s, a minute after answers promised for %v: archived %d, kept as promised %d, want 0 and %d: %+v",
				idem.DefaultRetention, doc.Archived, promised, len(keys), doc)
		}
		text := be.run("-retention", "10s", "sweep").ok(t).stdout
		if !regexp.MustCompile(`(?m)^Kept 3 responses past this idemctl's retention \(10s\): their answers promised them until \S+; the retention that answered them is longer than -retention\.$`).MatchString(text) {
			t.Fatalf("the disagreement is not reported:\n%s", text)
		}
		for _, k := range keys {
			if r := be.ship("org-1", k); r.Outcome("createShipment") != "replayed" {
				t.Fatalf("key %s within its promise: %s", k, r.Body)
			}
		}

		be.Clock.Advance(idem.DefaultRetention)
		doc = sweepDoc{}
		be.run("-json", "-retention", "10s", "sweep").ok(t).json(t, &doc)
		if doc.Archived != len(keys) {
			t.Fatalf("past the promise: archived %d, want %d: %+v", doc.Archived, len(keys), doc)
		}
		if text := be.run("-retention", "10s", "sweep").ok(t).stdout; strings.Contains(text, "Kept") {
			t.Fatalf("nothing is kept past its promise:\n%s", text)
		}
	})
}

// The retention mismatch is a metric: idem.sweep.promised, per table,
// counts what the last sweep kept past its retention because the answers
// promised longer; 0 before any sweep and once the promises end.
func TestSweepPromisedMetric(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		be := newBench(t, b)
		for _, k := range []string{"a", "b", "c"} {
			be.ship("org-1", k)
		}
		be.Clock.Advance(time.Minute)
		hook, err := idem.New(idem.Config{Backend: be.Client.IdempotencyBackend(), Clock: be.Clock, Retention: 10 * time.Second, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		admin := idemctl.New(hook)
		reader := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
		if err := admin.RegisterMetrics(mp); err != nil {
			t.Fatal(err)
		}
		promised := func() map[string]int64 {
			var rm metricdata.ResourceMetrics
			if err := reader.Collect(context.Background(), &rm); err != nil {
				t.Fatal(err)
			}
			out := map[string]int64{}
			for _, sm := range rm.ScopeMetrics {
				for _, m := range sm.Metrics {
					if m.Name != idemctl.MetricSweepPromised {
						continue
					}
					for _, p := range m.Data.(metricdata.Gauge[int64]).DataPoints {
						table, _ := p.Attributes.Value("idem.table")
						out[table.AsString()] = p.Value
					}
				}
			}
			return out
		}
		if got := promised(); got["shipments"] != 0 || got["idempotency_records"] != 0 || len(got) != 2 {
			t.Fatalf("before any sweep: %v, want 0 for each table", got)
		}
		if _, err := admin.Sweep(context.Background(), idemctl.SweepOptions{}); err != nil {
			t.Fatal(err)
		}
		if got := promised(); got["shipments"] != 3 || got["idempotency_records"] != 0 {
			t.Fatalf("after a sweep with a shorter retention: %v, want shipments 3", got)
		}
		be.Clock.Advance(idem.DefaultRetention)
		if _, err := admin.Sweep(context.Background(), idemctl.SweepOptions{}); err != nil {
			t.Fatal(err)
		}
		if got := promised(); got["shipments"] != 0 {
			t.Fatalf("past the promise: %v, want shipments 0", got)
		}
	})
}
