// Package idemhttp is the HTTP edge of a GraphQL server with the
// idempotency hook, in the manner of gqlgen's handler/extension: what a
// request may ask for before anything runs (Limits, OperationLimits), how
// the idempotency headers are read and written (ParseKeyHeader,
// FormatKeyHeader, Middleware), what reaches a client of an error
// (Presenter), and the wire format of the response's
// extensions.idempotency (FieldReport and the Outcome constants).
//
// idem.Hook.Handler puts all of it on a server; an application uses this
// package for the names (headers, outcomes), for Limits in idem.Config,
// and in tests.
package idemhttp
