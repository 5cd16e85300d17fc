package idemcode

// The rest of the wire format: the HTTP headers of the protocol and what
// a response's extensions.idempotency says of each idempotent field. The
// server (idemhttp, the engine) writes them and idemclient reads them, from
// this one declaration.

// HTTP header names of the protocol.
const (
	// HeaderKey carries the key (IETF draft-ietf-httpapi-idempotency-key-header):
	// a structured-field String ("abc") or a bare key (see
	// idemhttp.ParseKeyHeader). The response echoes the key of an
	// operation's only idempotent field in the form of the request's
	// header, or quoted. idemclient sends it when Request.KeyInHeader is
	// set.
	HeaderKey = "Idempotency-Key"
	// HeaderReplayed is set to "true" on a response in which every
	// idempotent field was replayed from its record.
	HeaderReplayed = "Idempotent-Replayed"
	// HeaderRetry marks a request as a retry of an earlier one with the
	// same keys: a positive integer, the retry's number (1 for the first
	// retry), as idemclient's Do sends it; the first attempt does not send
	// it. It is a hint and decides nothing: the hook looks the keys up
	// before claiming them (one statement that reads, where a claim of a
	// key that has a record sends an insert that writes nothing with it),
	// which saves a retry that reaches another process than the one that
	// stored the key about a third of its cost, and costs a retry whose
	// first attempt never reached the database one round trip. A value
	// that is not a positive integer is ignored.
	HeaderRetry = "Idempotency-Retry"
)

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
	// OutcomeReleased: the mutation failed with a retryable error; its
	// writes were rolled back, nothing was stored and the key is free for
	// a retry (idemclient's Do retries).
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
