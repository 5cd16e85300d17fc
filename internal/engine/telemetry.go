package engine

import (
	"context"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/goovo/idem/internal/idemkey"
)

// instrumentationName names the hook's meter and tracer.
const instrumentationName = "github.com/goovo/idem"

// Metric names: package idem exports and documents them (idem.MetricClaims…).
const (
	MetricClaims        = "idem.claims"
	MetricTakeovers     = "idem.takeovers"
	MetricReplays       = "idem.replays"
	MetricInProgress    = "idem.in_progress"
	MetricFailures      = "idem.failures"
	MetricRefusals      = "idem.refusals"
	MetricClaimDuration = "idem.claim.duration"
	MetricResponseSize  = "idem.response.size"
	MetricKeyless       = "idem.keyless"
	MetricRecovered     = "idem.recovered"
	MetricCompensated   = "idem.compensated"
	MetricAbandoned     = "idem.abandoned"
)

// telemetry holds the hook's instruments and tracer.
type telemetry struct {
	tracer        trace.Tracer
	claims        metric.Int64Counter
	takeovers     metric.Int64Counter
	replays       metric.Int64Counter
	inProgress    metric.Int64Counter
	failures      metric.Int64Counter
	refusals      metric.Int64Counter
	keyless       metric.Int64Counter
	recovered     metric.Int64Counter
	compensated   metric.Int64Counter
	abandoned     metric.Int64Counter
	claimDuration metric.Float64Histogram
	responseSize  metric.Int64Histogram
}

func newTelemetry(mp metric.MeterProvider, tp trace.TracerProvider) (*telemetry, error) {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	m := mp.Meter(instrumentationName)
	t := &telemetry{tracer: tp.Tracer(instrumentationName)}
	var err error
	counter := func(name, desc string) metric.Int64Counter {
		c, e := m.Int64Counter(name, metric.WithDescription(desc), metric.WithUnit("{request}"))
		if err == nil {
			err = e
		}
		return c
	}
	t.claims = counter(MetricClaims, "Idempotency keys claimed for a first run.")
	t.takeovers = counter(MetricTakeovers, "Expired idempotency claims taken over by a new attempt.")
	t.replays = counter(MetricReplays, "Stored results replayed to a retry.")
	t.inProgress = counter(MetricInProgress, "IDEMPOTENCY_IN_PROGRESS answers.")
	t.failures = counter(MetricFailures, "Failed runs of idempotent mutations, by class.")
	t.refusals = counter(MetricRefusals, "Idempotent mutations refused before running, by error code.")
	t.keyless = counter(MetricKeyless, "Calls without a key to mutations whose key is optional during a rollout; they ran without idempotency.")
	t.recovered = counter(MetricRecovered, "Abandoned idempotency claims the server ran to a stored result.")
	t.compensated = counter(MetricCompensated, "Recovered idempotency claims whose stored result is a final error.")
	t.abandoned = counter(MetricAbandoned, "Abandoned idempotency claims stored as failed with IDEMPOTENCY_ABANDONED.")
	if t.claimDuration, err = m.Float64Histogram(MetricClaimDuration, metric.WithUnit("s"),
		metric.WithDescription("Duration of the claim statement or the takeover."),
		metric.WithExplicitBucketBoundaries(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)); err != nil {
		return nil, err
	}
	if t.responseSize, err = m.Int64Histogram(MetricResponseSize, metric.WithUnit("By"),
		metric.WithDescription("Size of the stored responses."),
		metric.WithExplicitBucketBoundaries(64, 256, 1<<10, 4<<10, 16<<10, 64<<10, 256<<10, 1<<20)); err != nil {
		return nil, err
	}
	return t, err
}

// Attribute keys of the hook's metrics and spans.
const (
	attrField   = attribute.Key("idem.field")
	attrMode    = attribute.Key("idem.mode")
	attrFailure = attribute.Key("idem.failure")
	attrCode    = attribute.Key("idem.code")
	attrOutcome = attribute.Key("idem.outcome")
	attrAttempt = attribute.Key("idem.attempt")
	attrKeyHash = attribute.Key("idem.key_hash")
	attrTenant  = attribute.Key("idem.tenant")
	attrOrigin  = attribute.Key("idem.origin")
)

// Values of idem.origin: who ran a failed attempt, a client's request or
// the recoverer (Config.RecoverAfter), so that an alert on clients'
// failures does not fire for the recoverer's, nor the reverse.
const (
	originClient    = "client"
	originRecoverer = "recoverer"
)

// zeroedRefusals are the refusal codes whose series exist from the start
// (zero), so that an alert on their increase sees the first one.
var zeroedRefusals = []string{"IDEMPOTENCY_UNAVAILABLE", "IDEMPOTENCY_KEY_REUSED", "IDEMPOTENCY_KEY_EXPIRED"}

// zero adds 0 to every counter for each field of fields, with each value
// its attributes take by the field's configuration: a Prometheus series
// then exists from the start, and increase() over a window sees the first
// event (a counter born at its first event has no earlier sample to
// compare with; a restart would drop it again).
func (t *telemetry) zero(ctx context.Context, fields map[string]*fieldSpec) {
	for _, spec := range fields {
		tel := spec.tel
		t.claims.Add(ctx, 0, tel.claims)
		for _, c := range []metric.Int64Counter{t.takeovers, t.replays, t.inProgress, t.recovered, t.compensated, t.abandoned} {
			c.Add(ctx, 0, tel.field)
		}
		if spec.keyOptional {
			t.keyless.Add(ctx, 0, tel.field)
		}
		field := attrField.String(spec.name)
		for _, class := range []string{"final", "retryable"} {
			for _, origin := range []string{originClient, originRecoverer} {
				t.failures.Add(ctx, 0, metric.WithAttributes(field, attrFailure.String(class), attrOrigin.String(origin)))
			}
		}
		for _, code := range zeroedRefusals {
			t.refusals.Add(ctx, 0, metric.WithAttributes(field, attrCode.String(code)))
		}
	}
}

// failed counts a failed run of class (final or retryable), by its origin.
func (t *telemetry) failed(ctx context.Context, r *request, class string) {
	origin := originClient
	if recovering(ctx) {
		origin = originRecoverer
	}
	t.add(ctx, t.failures, r, attrFailure.String(class), attrOrigin.String(origin))
}

// fieldTelemetry is what every request of one field hands its span and
// instruments, built once with the field's spec: an attribute set is
// sorted and deduplicated when it is made, which would be work for each
// request (three sets on a first run) that always gives the same result.
type fieldTelemetry struct {
	spanName  string
	spanStart trace.SpanStartOption
	field     metric.MeasurementOption // idem.field
	claims    metric.MeasurementOption // idem.field, idem.mode
}

func newFieldTelemetry(name, mode string) fieldTelemetry {
	field, modeAttr := attrField.String(name), attrMode.String(mode)
	return fieldTelemetry{
		spanName:  "idem " + name,
		spanStart: trace.WithAttributes(field, modeAttr),
		field:     metric.WithAttributeSet(attribute.NewSet(field)),
		claims:    metric.WithAttributeSet(attribute.NewSet(field, modeAttr)),
	}
}

// startSpan starts the span of one idempotent field, a child of the
// operation's span when gqlgen's tracing extension made one.
func (t *telemetry) startSpan(ctx context.Context, r *request) (context.Context, trace.Span) {
	return t.tracer.Start(ctx, r.spec.tel.spanName, r.spec.tel.spanStart)
}

func (t *telemetry) add(ctx context.Context, c metric.Int64Counter, r *request, attrs ...attribute.KeyValue) {
	if len(attrs) == 0 { // idem.field alone (a replay's, say): the set made once
		c.Add(ctx, 1, r.spec.tel.field)
		return
	}
	c.Add(ctx, 1, metric.WithAttributes(append(attrs, attrField.String(r.spec.name))...))
}

func (t *telemetry) claimed(ctx context.Context, r *request, took time.Duration) {
	t.claimDuration.Record(ctx, took.Seconds(), r.spec.tel.field)
}

// finish records the outcome on the span and ends it. A span that records
// nothing (no tracer configured) is not given attributes, whose key hash
// would be computed for nothing.
func finishSpan(span trace.Span, r *request, outcome fieldOutcome, err error) {
	if span.IsRecording() {
		span.SetAttributes(attrOutcome.String(outcome.String()), attrKeyHash.String(idemkey.Hash(r.key)), attrTenant.String(r.tenant))
	}
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
