// Package idemcode is the wire format of the idem protocol, in one place:
// the error codes (a GraphQL error's extensions.code) that a server with
// the idem hook answers with, and whether each is final or retryable; the
// HTTP headers (HeaderKey, HeaderReplayed, HeaderRetry); the outcome of
// each idempotent field and the report of it in the response's
// extensions.idempotency (the Outcome constants, FieldReport). It depends
// on nothing but the standard library, so that any client can import it:
// idemclient does, and the server's packages and the JavaScript client's
// codes take their names from it. The hook's refusals are of its type
// Error (errors.Is against idem's Err* sentinels).
//
// A client retries a request, with the same idempotency key and the same
// body, after a retryable code; a final code is the intent's answer, and the
// same request gets it again. A code this package does not know (an
// application's own business codes, such as the example's
// ORDER_ALREADY_PAID) is final unless the field's outcome in
// extensions.idempotency says "released".
package idemcode

// The JavaScript client (clients/js) takes its codes from this file.
//go:generate go run ./internal/jscodes/gen

// Code is the value of extensions.code on a GraphQL error.
type Code string

// The codes of the idempotency hook (docs/contract.md).
const (
	// KeyMissing: the mutation needs a key and none was sent. Final.
	KeyMissing Code = "IDEMPOTENCY_KEY_MISSING"
	// KeyInvalid: the key is malformed (empty, over 255 bytes, not
	// printable ASCII, an Idempotency-Key header that is not one
	// structured-field string or bare token), or the operation names one
	// key for several idempotent fields. Final.
	KeyInvalid Code = "IDEMPOTENCY_KEY_INVALID"
	// KeyReused: the key was first used for a different request. Final.
	KeyReused Code = "IDEMPOTENCY_KEY_REUSED"
	// KeyForbidden: the key belongs to another caller of the tenant (the
	// server says who the caller is: idem.Config.KeyOwner); nothing of its
	// request or result is revealed, not even whether the arguments are
	// the same. Final.
	KeyForbidden Code = "IDEMPOTENCY_KEY_FORBIDDEN"
	// InProgress: another attempt holds the key; retry after
	// extensions.retryAfterSeconds. Retryable.
	InProgress Code = "IDEMPOTENCY_IN_PROGRESS"
	// KeyExpired: the key's result is past its retention window; the
	// mutation will not run again for the key. Final.
	KeyExpired Code = "IDEMPOTENCY_KEY_EXPIRED"
	// Unavailable: the record store could not be reached; the mutation was
	// not applied. Retryable.
	Unavailable Code = "IDEMPOTENCY_UNAVAILABLE"
	// Unauthenticated: the request has no tenant (or one the database
	// cannot store; the example server: X-Tenant-ID missing, or sent
	// twice). Final.
	Unauthenticated Code = "UNAUTHENTICATED"
	// RequestTooLarge: the mutation's arguments exceed the hook's limit;
	// nothing was stored or run. Final.
	RequestTooLarge Code = "IDEMPOTENCY_REQUEST_TOO_LARGE"
	// ResponseNotStored: the key's mutation ran once, but its result was
	// too large to store, so it cannot be replayed; it will not run again.
	// Final.
	ResponseNotStored Code = "IDEMPOTENCY_RESPONSE_NOT_STORED"
	// BadUserInput: the input cannot be stored (it breaks a validator or a
	// constraint of the record's entity, or holds text no database of the
	// server's can store: a NUL character, bytes that are not UTF-8), or
	// an argument could not be read. Nothing was stored or run; the key,
	// if any, was not spent. Final.
	BadUserInput Code = "BAD_USER_INPUT"
	// Abandoned: the key's claim was left pending by a client that never
	// came back, and the server could not finish it (the mutation opted
	// out of recovery, or its runs kept failing) before the retention
	// horizon; it will not run again. Final.
	Abandoned Code = "IDEMPOTENCY_ABANDONED"
)

// The codes of the hook's error presenter, for errors that carry none.
const (
	// InternalServerError: an unexpected error (a database or driver error,
	// a panic); the message is generic and extensions.correlationId names
	// the server's log line with the cause. Also the code of an error the
	// application wrote without a code and did not mark final. In an
	// idempotent mutation the attempt was rolled back and the key released.
	// Retryable.
	InternalServerError Code = "INTERNAL_SERVER_ERROR"
	// MutationFailed: an error the application marked final (idem.Final)
	// without a code of its own: stored, and replayed to every retry.
	// Final.
	MutationFailed Code = "MUTATION_FAILED"
	// NotFound: what the mutation looked for does not exist, or is another
	// tenant's: ent's not-found error, which a resolver returned without
	// marking it (the application's Config.MapError may answer it
	// otherwise). Stored, and replayed to every retry. Final.
	NotFound Code = "NOT_FOUND"
	// BadRequest: the request could not be read as a GraphQL request: a
	// body that is not JSON, a batch (a JSON array of operations, which the
	// server does not take), a method or Content-Type no transport of the
	// server takes. The message never quotes the body. Final.
	BadRequest Code = "BAD_REQUEST"
)

// The codes of the hook's request limits (idemhttp.Limits).
const (
	// BodyTooLarge: the request body is over the limit; refused with HTTP
	// 413 before it was read. Final.
	BodyTooLarge Code = "REQUEST_BODY_TOO_LARGE"
	// OperationLimitExceeded: the document is over one of the server's
	// limits (tokens, fields, aliases, depth, fields that share a response name,
	// nodes with fragments expanded); refused before it was validated, and
	// before anything ran. Final.
	OperationLimitExceeded Code = "OPERATION_LIMIT_EXCEEDED"
)

// The codes gqlgen and entgql answer with.
const (
	// ParseFailed: the document is not GraphQL. Final.
	ParseFailed Code = "GRAPHQL_PARSE_FAILED"
	// ValidationFailed: the document does not fit the schema, or the
	// variables do not fit the operation. Final.
	ValidationFailed Code = "GRAPHQL_VALIDATION_FAILED"
	// ComplexityLimitExceeded: the operation's complexity is over the
	// server's limit. Final.
	ComplexityLimitExceeded Code = "COMPLEXITY_LIMIT_EXCEEDED"
	// PersistedQueryNotFound: automatic persisted queries only; the client
	// sends the document with its hash instead of the same request. Final.
	PersistedQueryNotFound Code = "PERSISTED_QUERY_NOT_FOUND"
	// InvalidPagination: entgql's, for connection arguments that do not
	// fit (a negative first, say). Final.
	InvalidPagination Code = "INVALID_PAGINATION"
)

// retryable lists the retryable codes; every other code of All is final.
var retryable = map[Code]bool{
	InProgress:          true,
	Unavailable:         true,
	InternalServerError: true,
}

// all is every code, in the order of the declarations above.
var all = []Code{
	KeyMissing, KeyInvalid, KeyReused, KeyForbidden, InProgress, KeyExpired, Unavailable,
	Unauthenticated, RequestTooLarge, ResponseNotStored, BadUserInput, Abandoned,
	InternalServerError, MutationFailed, NotFound, BadRequest,
	BodyTooLarge, OperationLimitExceeded,
	ParseFailed, ValidationFailed, ComplexityLimitExceeded, PersistedQueryNotFound, InvalidPagination,
}

// All returns every code the server can answer with.
func All() []Code { return append([]Code(nil), all...) }

// Known reports whether c is one of the codes of All.
func (c Code) Known() bool {
	for _, k := range all {
		if k == c {
			return true
		}
	}
	return false
}

// Retryable reports whether a retry of the same request, with the same key,
// may get a different answer: true for InProgress, Unavailable and
// InternalServerError.
func (c Code) Retryable() bool { return retryable[c] }

// Final reports whether c is a known code that no retry of the same
// request changes.
func (c Code) Final() bool { return c.Known() && !c.Retryable() }
