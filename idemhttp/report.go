package idemhttp

// Outcomes of an idempotent field, as reported in
// extensions.idempotency.<field>.outcome. A client retries with the same key
// after OutcomeReleased and after the refusals that say so
// (IDEMPOTENCY_IN_PROGRESS, IDEMPOTENCY_UNAVAILABLE); the others are final
// for the key.
const (
	// OutcomeExecuted: the mutation ran and its result (data or a final
	// error) was stored.
	OutcomeExecuted = "executed"
	// OutcomeReplayed: the stored result of an earlier request.
	OutcomeReplayed = "replayed"
	// OutcomeReleased: the mutation failed with a retryable error; nothing
	// was stored and the key is free for a retry.
	OutcomeReleased = "released"
	// OutcomeRefused: the hook answered with one of its errors (see the
	// error's code) without running the mutation.
	OutcomeRefused = "refused"
	// OutcomeKeyless: the mutation's key is optional during a rollout
	// (@idempotent(keyRequired: false)) and the call sent none, so it ran
	// as it did before it was idempotent: nothing was claimed or stored,
	// and a retry runs it again.
	OutcomeKeyless = "keyless"
)

// FieldReport is what extensions.idempotency says of one idempotent field,
// under the field's response name.
type FieldReport struct {
	// Key is the field's idempotency key.
	Key string `json:"key"`
	// Outcome is one of the Outcome constants.
	Outcome string `json:"outcome"`
	// Replayed is Outcome == OutcomeReplayed.
	Replayed bool `json:"replayed"`
	// ExpiresAt is when the key stops being replayable, in RFC 3339 (UTC,
	// whole seconds, rounded down): the result's completion plus the
	// mutation's retention. Set when the key holds a result (executed,
	// replayed, and IDEMPOTENCY_KEY_EXPIRED, where it is past); absent
	// otherwise. A retry after it gets IDEMPOTENCY_KEY_EXPIRED, and the
	// key never runs again.
	ExpiresAt string `json:"expiresAt,omitempty"`
}
