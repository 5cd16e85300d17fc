package testapp_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/goovo/idem"
	"github.com/goovo/idem/idemcode"
	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/idemkey"
	"github.com/goovo/idem/internal/testkit"
	"github.com/goovo/idem/internal/testkit/testapp"
	"github.com/goovo/idem/internal/testkit/testapp/ent"
)

// A scripted sequence (a claim, a replay, an in-progress answer, a final
// failure) is counted once each in the OpenTelemetry metrics, traced as
// spans under the request's span, and logged without keys or responses.
func TestTelemetry(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		reader := sdkmetric.NewManualReader()
		spans := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
		var logs safeBuffer
		be := testapp.NewBench(t, b, idem.Config{
			MeterProvider:  sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)),
			TracerProvider: tp,
			Logger:         slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		})
		// Every request runs under a span of its own, as gqlgen's or the
		// HTTP server's tracing would make.
		inner := be.Server.Config.Handler
		be.Server.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ctx, span := tp.Tracer("test").Start(r.Context(), "operation")
			defer span.End()
			inner.ServeHTTP(w, r.WithContext(ctx))
		})

		const secretKey = "customer-secret-key-0123456789"
		started, release := make(chan struct{}), make(chan struct{})
		var once, releaseOnce sync.Once
		unblock := func() { releaseOnce.Do(func() { close(release) }) }
		t.Cleanup(unblock) // a failed assertion must not leave a handler blocked
		be.Resolver.Hook = func(ctx context.Context, s *ent.Shipment) error {
			key, _ := idem.KeyFromContext(ctx)
			switch key {
			case "blocked":
				once.Do(func() { close(started) })
				<-release
			case "failing":
				return idem.Final(errors.New("no such route"))
			}
			return nil
		}

		if r := be.Post("org-1", secretKey, 4242); len(r.Errors) > 0 { // claim
			t.Fatalf("%s", r.Body)
		}
		if r := be.Post("org-1", secretKey, 4242); !r.Replayed { // replay
			t.Fatalf("%s", r.Body)
		}
		first := make(chan *testkit.Response)
		go func() { first <- be.Post("org-1", "blocked", 1) }() // claim
		<-started
		if r := be.Post("org-1", "blocked", 1); r.Code() != string(idemcode.InProgress) { // in progress
			t.Fatalf("%s", r.Body)
		}
		unblock()
		<-first
		if r := be.Post("org-1", "failing", 1); r.Outcome("createShipment") != idemcode.OutcomeExecuted { // claim, final failure
			t.Fatalf("%s", r.Body)
		}

		var rm metricdata.ResourceMetrics
		if err := reader.Collect(context.Background(), &rm); err != nil {
			t.Fatal(err)
		}
		want := map[string]int64{
			idem.MetricClaims:              3,
			idem.MetricReplays:             1,
			idem.MetricInProgress:          1,
			idem.MetricFailures + "/final": 1,
		}
		got := counters(rm)
		for name, n := range want {
			if got[name] != n {
				t.Errorf("%s = %d, want %d (all: %v)", name, got[name], n, got)
			}
		}
		for _, absent := range []string{idem.MetricTakeovers, idem.MetricRefusals, idem.MetricFailures + "/retryable"} {
			if got[absent] != 0 {
				t.Errorf("%s = %d, want 0", absent, got[absent])
			}
		}
		if n := histogramCount(rm, idem.MetricResponseSize); n != 3 {
			t.Errorf("%s recorded %d sizes, want 3", idem.MetricResponseSize, n)
		}
		if n := histogramCount(rm, idem.MetricClaimDuration); n < 3 {
			t.Errorf("%s recorded %d durations, want at least 3", idem.MetricClaimDuration, n)
		}

		var outcomes []string
		for _, s := range spans.Ended() {
			if s.Name() != "idem createShipment" {
				continue
			}
			if !s.Parent().IsValid() {
				t.Errorf("span %s has no parent", s.Name())
			}
			for _, a := range s.Attributes() {
				if a.Key == "idem.outcome" {
					outcomes = append(outcomes, a.Value.AsString())
				}
				if strings.Contains(a.Value.Emit(), secretKey) {
					t.Errorf("span attribute %s carries the key", a.Key)
				}
			}
		}
		if strings.Join(outcomes, ",") != "executed,replayed,refused,executed,executed" {
			t.Errorf("span outcomes %v", outcomes)
		}

		out := logs.String()
		if out == "" {
			t.Fatal("nothing logged")
		}
		// The stored response is recognised by its field name, not by the
		// weight's digits, which a timestamp or a duration may carry too.
		if strings.Contains(out, secretKey) || strings.Contains(out, "weightGrams") || strings.Contains(out, "Lyon") || strings.Contains(out, "no such route") {
			t.Fatalf("logs carry a key or a stored response:\n%s", out)
		}
		if !strings.Contains(out, idemkey.Hash("blocked")) {
			t.Fatalf("logs do not identify keys by hash:\n%s", out)
		}
	})
}

// Limits are enforced: oversized arguments before any database work, an
// oversized result returned but not stored, and its retry told so instead
// of running again.
func TestLimits(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		be := testapp.NewBench(t, b, idem.Config{MaxResponseBytes: 100, MaxArgumentBytes: 80})
		var calls int
		be.Resolver.Hook = func(context.Context, *ent.Shipment) error { calls++; return nil }

		long := be.GQL("org-1", `mutation($k: String!, $d: String!) { createShipment(idempotencyKey: $k, input: {destination: $d, weightGrams: 1}) { id } }`,
			map[string]any{"k": "big-args", "d": strings.Repeat("x", 100)})
		if long.Code() != string(idemcode.RequestTooLarge) || calls != 0 || be.Count() != 0 {
			t.Fatalf("oversized arguments: %s (calls %d)", long.Body, calls)
		}

		first := be.Post("org-1", "big-result", 1)
		if len(first.Errors) > 0 || !strings.Contains(string(first.Data), `"label":"attempt-1"`) {
			t.Fatalf("oversized result: %s", first.Body)
		}
		again := be.Post("org-1", "big-result", 1)
		if again.Code() != string(idemcode.ResponseNotStored) || calls != 1 {
			t.Fatalf("retry of an unstored result: %s (calls %d)", again.Body, calls)
		}
	})
}

// counters sums each counter's points, by name and by the idem.failure
// attribute ("idem.failures/final").
func counters(rm metricdata.ResourceMetrics) map[string]int64 {
	out := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			sum, ok := m.Data.(metricdata.Sum[int64])
			if !ok {
				continue
			}
			for _, dp := range sum.DataPoints {
				name := m.Name
				if v, ok := dp.Attributes.Value(attribute.Key("idem.failure")); ok {
					name += "/" + v.AsString()
				}
				out[name] += dp.Value
			}
		}
	}
	return out
}

func histogramCount(rm metricdata.ResourceMetrics, name string) (n uint64) {
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			switch h := m.Data.(type) {
			case metricdata.Histogram[int64]:
				for _, dp := range h.DataPoints {
					n += dp.Count
				}
			case metricdata.Histogram[float64]:
				for _, dp := range h.DataPoints {
					n += dp.Count
				}
			}
		}
	}
	return n
}

type safeBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *safeBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *safeBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
