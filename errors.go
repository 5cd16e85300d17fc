package idem

import (
	"github.com/goovo/idem/idemcode"
	"github.com/goovo/idem/internal/outcome"
)

// Code is the value of extensions.code on the GraphQL errors the hook
// answers with. The names are part of the contract: clients switch on them.
// The list, and whether each code is final or retryable, is package
// idemcode, which clients import without the server's dependencies.
type Code = idemcode.Code

// The codes of CONTRACT.md (see idemcode for the others the server answers
// with).
const (
	// CodeKeyMissing: the mutation needs a key and none was sent.
	CodeKeyMissing = idemcode.KeyMissing
	// CodeKeyInvalid: the key is empty, longer than MaxKeyLength or not
	// printable ASCII, the Idempotency-Key header is malformed, or the
	// operation names one key for several idempotent fields.
	CodeKeyInvalid = idemcode.KeyInvalid
	// CodeKeyReused: the key was first used for a different request.
	CodeKeyReused = idemcode.KeyReused
	// CodeInProgress: another attempt holds the key; retry after
	// extensions.retryAfterSeconds.
	CodeInProgress = idemcode.InProgress
	// CodeKeyExpired: the key's record is past its retention window.
	CodeKeyExpired = idemcode.KeyExpired
	// CodeUnavailable: the record store could not be reached; the mutation
	// did not run (or its writes were rolled back).
	CodeUnavailable = idemcode.Unavailable
	// CodeUnauthenticated: no tenant in the request's context.
	CodeUnauthenticated = idemcode.Unauthenticated
	// CodeRequestTooLarge: the mutation's arguments exceed
	// Config.MaxArgumentBytes; nothing was stored or run.
	CodeRequestTooLarge = idemcode.RequestTooLarge
	// CodeResponseNotStored: the key's mutation ran once, but its result
	// exceeded Config.MaxResponseBytes and was not stored, so it cannot be
	// replayed; it will not run again either.
	CodeResponseNotStored = idemcode.ResponseNotStored
	// CodeAbandoned: the key's claim was abandoned by its client and could
	// not be finished by the recoverer (Config.RecoverAfter) within the
	// retention window; it is stored as the key's result.
	CodeAbandoned = idemcode.Abandoned
	// CodeInternal: an unexpected error, answered with a generic message and
	// a correlation id (see Extension.ErrorPresenter).
	CodeInternal = idemcode.InternalServerError
	// CodeBodyTooLarge: the request body exceeds Limits.MaxBodyBytes (HTTP
	// 413).
	CodeBodyTooLarge = idemcode.BodyTooLarge
	// CodeOperationLimit: the document exceeds Limits.MaxTokens,
	// MaxFields, MaxAliases, MaxDepth, MaxNodes or MaxFieldPairs.
	CodeOperationLimit = idemcode.OperationLimitExceeded
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

// CodeBadInput: the mutation's input cannot be stored (it breaks a
// validator or a constraint of the record's entity, or holds text the
// database cannot store: a NUL character, bytes that are not UTF-8).
// Nothing was stored or run; the same input fails the same way.
const CodeBadInput = idemcode.BadUserInput
