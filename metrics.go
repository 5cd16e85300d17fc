package idem

import "github.com/goovo/idem/internal/engine"

// Metric names of the hook's OpenTelemetry instruments (Config.MeterProvider).
// Every instrument carries the attribute idem.field (the mutation); the
// others say what else they carry.
const (
	// MetricClaims counts keys claimed for a first run (attribute idem.mode).
	MetricClaims = engine.MetricClaims
	// MetricTakeovers counts expired claims taken over by another attempt.
	MetricTakeovers = engine.MetricTakeovers
	// MetricReplays counts stored results replayed to a retry.
	MetricReplays = engine.MetricReplays
	// MetricInProgress counts IDEMPOTENCY_IN_PROGRESS answers.
	MetricInProgress = engine.MetricInProgress
	// MetricFailures counts failed runs (attribute idem.failure: "final",
	// stored and replayed, or "retryable", rolled back and released).
	MetricFailures = engine.MetricFailures
	// MetricRefusals counts the hook's other refusals (attribute
	// idem.code: the error code).
	MetricRefusals = engine.MetricRefusals
	// MetricClaimDuration is the time the claim statement (or the takeover)
	// took, in seconds.
	MetricClaimDuration = engine.MetricClaimDuration
	// MetricResponseSize is the size of each stored response, in bytes.
	MetricResponseSize = engine.MetricResponseSize
	// MetricKeyless counts calls without a key to mutations whose key is
	// optional during a rollout (@idempotent(keyRequired: false)): they ran
	// without idempotency. At zero, the key can be made required.
	MetricKeyless = engine.MetricKeyless
	// MetricRecovered counts abandoned claims the recoverer ran to a
	// stored result (Config.RecoverAfter).
	MetricRecovered = engine.MetricRecovered
	// MetricCompensated counts the recovered claims whose stored result is
	// a final error: the resolver's own logic undid or refused the work
	// (the example's payment voids its charge: ORDER_ALREADY_PAID).
	MetricCompensated = engine.MetricCompensated
	// MetricAbandoned counts claims the recoverer could not finish, stored
	// as failed with IDEMPOTENCY_ABANDONED.
	MetricAbandoned = engine.MetricAbandoned
)
