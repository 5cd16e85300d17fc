// Package extension holds the gqlgen handler extensions that Hook.Handler
// installs beside the idempotency engine, for the jobs that are not
// idempotency: refusing text a database cannot store (Text), bounding the
// errors of an answer (ErrorLimit), and putting the request's tenant into
// every operation's context (Tenant). One file each, as gqlgen's own
// graphql/handler/extension; the engine (internal/engine) only claims,
// runs and replays.
package extension
