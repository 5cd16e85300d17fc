package idemcode

import "time"

// Error is a refusal by the idempotency hook: a request it answered with
// one of its codes without running the mutation (or after rolling it back).
// It reaches clients as a GraphQL error with extensions.code,
// extensions.idempotencyKey and, for InProgress,
// extensions.retryAfterSeconds; the server's error presenter and
// idem.ValidateKey's callers meet it as a Go error. Compare with
// errors.Is against the sentinels of package idem (idem.ErrInProgress…):
// two errors with the same code are the same error.
type Error struct {
	Code    Code
	Message string
	// Key is the idempotency key the error is about ("" when none was sent).
	Key string
	// RetryAfter is set for InProgress.
	RetryAfter time.Duration
}

// Error implements error.
func (e *Error) Error() string { return string(e.Code) + ": " + e.Message }

// Is reports whether target is an *Error with the same code, so that
// errors.Is(err, idem.ErrInProgress) works on any in-progress error.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}
