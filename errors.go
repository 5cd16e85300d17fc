package idem

import (
	"github.com/goovo/idem/idembackend"
	"github.com/goovo/idem/idemcode"
	"github.com/goovo/idem/internal/outcome"
)

// Sentinel values to compare with errors.Is: a refusal of the hook (an
// *idemcode.Error) is the sentinel of its code.
var (
	ErrKeyMissing        = &idemcode.Error{Code: idemcode.KeyMissing}
	ErrKeyInvalid        = &idemcode.Error{Code: idemcode.KeyInvalid}
	ErrKeyReused         = &idemcode.Error{Code: idemcode.KeyReused}
	ErrInProgress        = &idemcode.Error{Code: idemcode.InProgress}
	ErrKeyExpired        = &idemcode.Error{Code: idemcode.KeyExpired}
	ErrUnavailable       = &idemcode.Error{Code: idemcode.Unavailable}
	ErrUnauthenticated   = &idemcode.Error{Code: idemcode.Unauthenticated}
	ErrRequestTooLarge   = &idemcode.Error{Code: idemcode.RequestTooLarge}
	ErrResponseNotStored = &idemcode.Error{Code: idemcode.ResponseNotStored}
	ErrAbandoned         = &idemcode.Error{Code: idemcode.Abandoned}
)

// ErrWriteOutsideClaim is the error a resolver of an idempotent mutation
// gets from an ent write outside the claim's transaction: through the
// application's client instead of ent.FromContext(ctx), or through a
// transaction of its own. The write never reached the database, and the
// mutation is refused whatever the resolver does with the error (the
// client gets INTERNAL_SERVER_ERROR, the key is released, the log names
// the resolver). See CommitsAlone for a write that must commit on its own.
var ErrWriteOutsideClaim = idembackend.ErrWriteOutsideClaim

// Final marks err as a final result of the mutation (a validation or business
// rule error): the hook stores it as a failed record and replays it to every
// retry with the same key, and the mutation's database writes are rolled
// back. Errors that are not marked are retryable.
func Final(err error) error { return outcome.Final(err) }

// Retryable marks err as a transient failure: the hook rolls the mutation's
// writes back and releases the claim, so a retry with the same key runs the
// mutation again at once. Unmarked errors are treated the same way; the
// marker exists to override a Final further down the chain.
func Retryable(err error) error { return outcome.Retryable(err) }

// IsFinal reports whether the outermost Final or Retryable marker in err's
// chain is Final.
func IsFinal(err error) bool { return outcome.IsFinal(err) }
