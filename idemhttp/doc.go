// Package idemhttp is the HTTP edge of a GraphQL server with the
// idempotency hook, in the manner of gqlgen's handler/extension: what a
// request may ask for before anything runs (Limits, OperationLimits), how
// the idempotency headers are read and written (ParseKeyHeader,
// FormatKeyHeader, Middleware) and what reaches a client of an error
// (Presenter). The names it reads and writes (the headers, the outcomes,
// extensions.idempotency's FieldReport) are package idemcode's, which
// clients share.
//
// idem.Hook.Handler puts all of it on a server; an application uses this
// package for Limits in idem.Config, and in tests.
package idemhttp
