package idem

import "github.com/goovo/idem/internal/engine"

// Metric names of the hook's OpenTelemetry instruments (Config.MeterProvider).
// Every instrument carries the attribute idem.field (the mutation); the
// others say what else they carry. Once the hook has read the GraphQL
// schema (Hook.Handler, Hook.ReadSchema), every counter exists at zero for
// each @idempotent field (failures for each class and origin, refusals for
// IDEMPOTENCY_UNAVAILABLE, _KEY_REUSED and _KEY_EXPIRED), so that an alert
// on its increase sees the first event, also after a restart.
const (
	// MetricClaims ("idem.claims") counts keys claimed for a first run
	// (attribute idem.mode).
	MetricClaims = engine.MetricClaims
	// MetricTakeovers ("idem.takeovers") counts expired claims taken over by
	// another attempt.
	MetricTakeovers = engine.MetricTakeovers
	// MetricReplays ("idem.replays") counts stored results replayed to a
	// retry.
	MetricReplays = engine.MetricReplays
	// MetricInProgress ("idem.in_progress") counts IDEMPOTENCY_IN_PROGRESS
	// answers.
	MetricInProgress = engine.MetricInProgress
	// MetricFailures ("idem.failures") counts failed runs (attribute
	// idem.failure: "final", stored and replayed, or "retryable", rolled back
	// and released; attribute idem.origin: "client", a request's, or
	// "recoverer", a run of Config.RecoverAfter's, so that each is alerted
	// on apart).
	MetricFailures = engine.MetricFailures
	// MetricRefusals ("idem.refusals") counts the hook's other refusals
	// (attribute idem.code: the error code).
	MetricRefusals = engine.MetricRefusals
	// MetricClaimDuration ("idem.claim.duration") is the time the claim
	// statement (or the takeover) took, in seconds.
	MetricClaimDuration = engine.MetricClaimDuration
	// MetricResponseSize ("idem.response.size") is the size of each stored
	// response, in bytes.
	MetricResponseSize = engine.MetricResponseSize
	// MetricKeyless ("idem.keyless") counts calls without a key to mutations
	// whose key is optional during a rollout (@idempotent(keyRequired:
	// false)): they ran without idempotency. At zero, the key can be made
	// required.
	MetricKeyless = engine.MetricKeyless
	// MetricRecovered ("idem.recovered") counts abandoned claims the recoverer
	// ran to a stored result (Config.RecoverAfter).
	MetricRecovered = engine.MetricRecovered
	// MetricCompensated ("idem.compensated") counts the recovered claims whose
	// stored result is a final error: the resolver's own logic undid or
	// refused the work (the example's payment voids its charge:
	// ORDER_ALREADY_PAID).
	MetricCompensated = engine.MetricCompensated
	// MetricAbandoned ("idem.abandoned") counts claims the recoverer could not
	// finish, stored as failed with IDEMPOTENCY_ABANDONED.
	MetricAbandoned = engine.MetricAbandoned
)
