package idem

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/goovo/idem/idembackend"
	"github.com/goovo/idem/idemhttp"
	"github.com/goovo/idem/internal/engine"
	"github.com/goovo/idem/internal/store"
)

// Default values of Config.
const (
	DefaultMaxResponseBytes = 1 << 20
	DefaultMaxArgumentBytes = 64 << 10
	DefaultLease            = 30 * time.Second
	DefaultRetention        = 24 * time.Hour
	DefaultTombstoneHorizon = 30 * 24 * time.Hour
	DefaultAttemptTimeout   = 2 * time.Minute
	DefaultRecoverAfter     = 10 * time.Second
)

// RecoverNever turns the recoverer off (Config.RecoverAfter).
const RecoverNever time.Duration = -1

// Config configures the hook (New). Backend is required, and Tenant to
// serve; every other field has a working zero value.
type Config struct {
	// Backend connects the hook to the ent client that holds the records:
	// client.IdempotencyBackend(). Required.
	Backend idembackend.Backend

	// Tenant returns the tenant of the request from its context, as the
	// application's authentication put it there. Keys are unique per tenant.
	// An error or an empty tenant answers UNAUTHENTICATED. It is also called
	// once for every operation, queries included, to put the tenant into
	// its context for isolated entities (idemschema.Mixin{Isolate: true}).
	// Required to serve (Hook.Handler).
	Tenant func(ctx context.Context) (string, error)

	// KeyOwner returns who sent the request within its tenant (a user id),
	// as the application's authentication put it there: a key then
	// belongs to the caller who first used it. A request of another caller
	// of the tenant with that key is refused with
	// IDEMPOTENCY_KEY_FORBIDDEN, whatever it asks and whatever became of
	// the first request, so that it learns nothing of it (neither its
	// result nor whether the arguments are the same); the key's owner's
	// retries replay as before. "" is a request that acts for its tenant
	// alone, which owns its keys as any other caller. The record keeps a
	// hash of the owner (in its fingerprint), never the owner itself;
	// records stored before KeyOwner was set belong to the tenant. Called
	// for every request of an idempotent mutation, before its key is
	// looked up: keep it cheap. The recoverer's runs are the server's own,
	// and are not checked. Default nil: keys belong to the tenant, and
	// any caller of the tenant who sends one gets its stored answer
	// (docs/contract.md, "Whose keys").
	KeyOwner func(ctx context.Context) string

	// Lease is how long a pending claim belongs to the attempt that made it
	// before another request with the same key may take it over. A
	// mutation's @idempotent(leaseSeconds:) overrides it. Default 30s.
	Lease time.Duration

	// AttemptTimeout bounds an attempt once it has claimed its key. From
	// its claim on, an attempt runs to its end whether or not its client
	// still waits: a client that hangs up (a closed connection, a
	// cancelled request) does not abort it. Its resolver runs on a
	// context that keeps the request's values but not its cancellation,
	// and the result is stored and replayed to the key's next request.
	// That context ends, and the attempt rolls back and releases its
	// claim, only when the attempt has run AttemptTimeout, when it lost
	// its lease (a renewal found the claim taken over; PostgreSQL), or
	// when Hook.Shutdown's drain is over; a panic and the resolver's
	// own errors end it as before. Give it room for the slowest call
	// your resolvers make (a payment provider's timeout, say).
	// Default 2 minutes.
	AttemptTimeout time.Duration

	// KeyHeader accepts the key in the Idempotency-Key HTTP header (IETF
	// draft-ietf-httpapi-idempotency-key-header) as well as in the
	// idempotencyKey argument, for operations with exactly one idempotent
	// field. Generate with idemgen.WithKeyHeader so that the argument is
	// optional. The header needs the handler Hook.Handler returns.
	// Default false.
	KeyHeader bool

	// Retention is how long a finished record's response stays
	// replayable; an entity's idemschema.Retention overrides it. Past it the
	// key answers IDEMPOTENCY_KEY_EXPIRED, and never runs again while its
	// tombstone lasts; the sweeper (idemctl.Admin.Sweep) moves the
	// response to the archive table. Default 24 hours, the article's.
	Retention time.Duration

	// TombstoneHorizon is how long after its completion a key is at least
	// remembered at all: the sweeper purges a tombstone a horizon after it
	// archived the record, and a request with the key then runs as a new
	// intent: clients must not retry an intent that old. It must exceed
	// every retention. Default 30 days.
	TombstoneHorizon time.Duration

	// WaitForInFlight is how long a duplicate that finds a live pending claim
	// waits for its result (and replays it) before answering
	// IDEMPOTENCY_IN_PROGRESS. Default 0: answer at once.
	WaitForInFlight time.Duration

	// NoOneStatementCreate turns the one-statement create off: every
	// atomic create then claims in its transaction, as before. By default
	// an atomic create whose selection its row answers is one
	// autocommitted INSERT of the row born completed (docs/protocol.md, "A
	// claim born completed"); its answer is rendered before the row has
	// its database id, which is written in where the row's placeholder id
	// was rendered as its decimal digits. Set it when an ID scalar renders
	// integer ids otherwise (a global id that encodes them), or to compare
	// the two paths.
	NoOneStatementCreate bool

	// Clock shifts the database clock the hook reads, so that tests can
	// expire leases and records without waiting. Default nil: the database's
	// own clock.
	Clock *ClockOffset

	// MaxResponseBytes bounds a stored response. A larger result is still
	// returned to the client that ran the mutation, but the record keeps
	// only a note that it was too large, and a retry gets
	// IDEMPOTENCY_RESPONSE_NOT_STORED instead of a second run. Select less
	// in idempotent mutations. Default 1 MiB.
	MaxResponseBytes int

	// MaxArgumentBytes bounds a mutation's arguments (their canonical form),
	// checked before any database work: IDEMPOTENCY_REQUEST_TOO_LARGE.
	// Default 64 KiB.
	MaxArgumentBytes int

	// MeterProvider and TracerProvider receive the hook's OpenTelemetry
	// metrics (see the Metric constants) and spans (one per idempotent
	// field, a child of the operation's span). Default: otel's global
	// providers, which do nothing until the application installs an SDK.
	MeterProvider  metric.MeterProvider
	TracerProvider trace.TracerProvider

	// Logger receives the hook's records of refusals and store failures,
	// and the causes of the unexpected errors that clients see only as
	// INTERNAL_SERVER_ERROR with a correlation id. Keys are logged as a short
	// hash, never in full, and stored responses are never logged. Default
	// slog.Default().
	Logger *slog.Logger

	// Limits bound the size and shape of a request (body, fields, aliases,
	// depth, complexity); see idemhttp.Limits for each default. Hook.Handler
	// applies them.
	Limits idemhttp.Limits

	// RecoverAfter turns the recoverer on: every server process looks, every
	// quarter of RecoverAfter (at most every 10 s), for claims still
	// pending whose lease ran out more than RecoverAfter ago (their client
	// crashed or gave up and never retried) and runs each again, in
	// process, through the server's own handler: the same field, arguments,
	// selection, tenant and key, so that work outside the database
	// deduplicates on the key and the result is stored as a client's
	// attempt would store it. This includes an attempt that failed with a
	// retryable error and was released (INTERNAL_SERVER_ERROR,
	// IDEMPOTENCY_UNAVAILABLE): if its client does not come back, the
	// server finishes that intent; so a client must retry with the same
	// key, never a new one. It takes each claim over like any retry, so
	// several processes never run one claim twice. It runs the claim as
	// its tenant alone (TenantContext), or as its caller (Caller and
	// CallerContext). Each round lists every tenant's oldest claim before
	// any tenant's second, and a claim it does not run (its run failed
	// or was refused) goes to the back of the list: no claim, and no
	// tenant, keeps another's from being run. A run that fails with a
	// retryable error is tried again later, less and less often. A claim
	// still unfinished a retention window (Retention) after it was made is
	// not run again: it is stored as failed with IDEMPOTENCY_ABANDONED, and
	// so is, then, a claim that cannot be run (@idempotent(recover: false),
	// or an operation too large to keep), which until then waits for its
	// client as before and is not listed. It needs TenantContext or
	// CallerContext, and runs through the handler of Hook.Handler.
	//
	// Default DefaultRecoverAfter (10 s) when TenantContext or
	// CallerContext is set, as docs/adopting.md's app does: the recoverer
	// is on. Without either it cannot act as a claim's caller, and is off.
	// RecoverNever (any negative value) turns it off. What an app gives up
	// then: an intent whose client does not come back (the browser closed,
	// the app killed, the server that ran it killed or restarted
	// mid-attempt, an attempt released by a retryable error or by
	// Hook.Shutdown) stays pending, unfinished, until its key comes back,
	// which may be never; work it did outside the database before it
	// stopped (a provider's charge) stays unrecorded until then; and no
	// process stores it as IDEMPOTENCY_ABANDONED at its retention window.
	// Turn it off only when every client is sure to retry with its key (a
	// server-to-server caller with a durable queue); a mutation whose
	// resolver must not run without its client says
	// @idempotent(recover: false) instead.
	RecoverAfter time.Duration

	// TenantContext is the inverse of Tenant: it returns ctx carrying the
	// tenant, as the application's authentication would put it there, so
	// that the recoverer runs a claim as its tenant. That is all the
	// recoverer's run is, then: a resolver that asks who the caller is
	// (a user, a role) finds nobody; set Caller and CallerContext instead
	// when resolvers check more than the tenant. Required with
	// RecoverAfter unless CallerContext is set, which replaces it.
	TenantContext func(ctx context.Context, tenant string) context.Context

	// Caller returns, from a request's context, what the application's
	// authentication needs to act as the request's caller again: an
	// opaque value, in any encoding (a user id and a role, say). Every
	// claim the recoverer may run keeps it (inside the claim's stored
	// operation, counted in its 64 KiB) until the claim is finished, and
	// the recoverer hands it back to CallerContext. Keep who the caller
	// is, for the application to authorise again, never something that
	// proves it: no session or bearer token, cookie, password, API key
	// or signed assertion, nothing that expires or grants more than the
	// caller's own rights. It sits in the database, in clear, as long as
	// the claim is pending (up to a retention window), and is run with
	// long after the request. Called for every request of a mutation
	// whose claims keep an operation (lease mode, recoverable), before
	// its key is looked up, whether this process runs the recoverer or
	// not (another process may): keep it cheap. Default nil: claims keep
	// no caller.
	Caller func(ctx context.Context) []byte

	// CallerContext returns ctx acting as the caller of a claim the
	// recoverer runs: the claim's tenant and what Caller returned when it
	// was made (nil when Caller was not set or returned nil), as the
	// application's authentication would put them there, after checking
	// that the caller may still act (a user deleted or a role revoked
	// since). An error refuses the run: the claim is tried again later,
	// behind the others, and is stored as IDEMPOTENCY_ABANDONED at the
	// horizon if its client never comes back. It replaces TenantContext
	// (set one of the two). Default nil: TenantContext.
	CallerContext func(ctx context.Context, tenant string, caller []byte) (context.Context, error)

	// Done stops the background work the hook starts (the recoverer) when
	// it is closed. Default nil: it runs for the life of the process.
	Done <-chan struct{}

	// ErrorPresenter, if set, presents the errors that reach clients as
	// they are (GraphQL errors the application wrote, the hook's own, errors
	// marked Final), after the hook's presenter has replaced every
	// unexpected error with a generic one. Hook.Handler sets the hook's
	// presenter on the server (idemhttp.Presenter): set yours here, not
	// with srv.SetErrorPresenter. Default graphql.DefaultErrorPresenter.
	ErrorPresenter graphql.ErrorPresenterFunc

	// MapError, if set, is asked about every unexpected error (one the
	// application did not write for clients; see idemhttp.Presenter)
	// before the hook replaces it with INTERNAL_SERVER_ERROR, and about
	// ent's not-found and constraint errors before the hook answers them
	// NOT_FOUND and BAD_USER_INPUT (final, by default): it returns the
	// GraphQL error the client sees instead, or nil to leave the error to
	// the default. The
	// returned error is presented as one written for clients (path and
	// locations filled in, INTERNAL_SERVER_ERROR when it has no code,
	// then ErrorPresenter), and the cause is not logged. It changes what
	// clients see, not what the hook does: an error the resolver did not
	// mark Final still rolls the attempt back and releases the key.
	MapError func(ctx context.Context, err error) *gqlerror.Error
}

func (c Config) withDefaults() (Config, error) {
	switch {
	case c.RecoverAfter < 0:
		c.RecoverAfter = RecoverNever
	case c.RecoverAfter == 0 && (c.TenantContext != nil || c.CallerContext != nil):
		c.RecoverAfter = DefaultRecoverAfter
	case c.RecoverAfter == 0:
		c.RecoverAfter = RecoverNever // it could not act as a claim's caller
	}
	if c.TenantContext != nil && c.CallerContext != nil {
		return c, errors.New("idem: Config.CallerContext replaces Config.TenantContext: set one of the two")
	}
	if c.Caller != nil && c.CallerContext == nil {
		return c, errors.New("idem: Config.Caller needs Config.CallerContext, which gives the recoverer's run the caller that Caller keeps")
	}
	if c.RecoverAfter > 0 && c.TenantContext == nil && c.CallerContext == nil {
		return c, errors.New("idem: Config.TenantContext (or Config.CallerContext) is required with Config.RecoverAfter (the recoverer runs a claim as its tenant), or turn the recoverer off with idem.RecoverNever")
	}
	if c.ErrorPresenter == nil {
		c.ErrorPresenter = graphql.DefaultErrorPresenter
	}
	if c.Backend == nil {
		return c, errors.New("idem: Config.Backend is required (client.IdempotencyBackend())")
	}
	if c.Retention < 0 || c.TombstoneHorizon < 0 {
		return c, errors.New("idem: Config.Retention and Config.TombstoneHorizon must not be negative")
	}
	if c.Retention == 0 {
		c.Retention = DefaultRetention
	}
	if c.TombstoneHorizon == 0 {
		c.TombstoneHorizon = DefaultTombstoneHorizon
	}
	for _, r := range c.Backend.RecordTables() {
		if ret := store.RetentionOf(r, c.Retention); ret >= c.TombstoneHorizon {
			return c, fmt.Errorf("idem: Config.TombstoneHorizon (%v) must exceed the retention of %s (%v)", c.TombstoneHorizon, r.Entity, ret)
		}
	}
	if c.Lease < 0 {
		return c, errors.New("idem: Config.Lease must not be negative")
	}
	if c.Lease == 0 {
		c.Lease = DefaultLease
	}
	if c.AttemptTimeout < 0 {
		return c, errors.New("idem: Config.AttemptTimeout must not be negative")
	}
	if c.AttemptTimeout == 0 {
		c.AttemptTimeout = DefaultAttemptTimeout
	}
	if c.WaitForInFlight < 0 {
		return c, errors.New("idem: Config.WaitForInFlight must not be negative")
	}
	if c.MaxResponseBytes < 0 || c.MaxArgumentBytes < 0 {
		return c, errors.New("idem: Config.MaxResponseBytes and Config.MaxArgumentBytes must not be negative")
	}
	if c.MaxResponseBytes == 0 {
		c.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if c.MaxArgumentBytes == 0 {
		c.MaxArgumentBytes = DefaultMaxArgumentBytes
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}

// engine is what the engine runs with, of c (completed).
func (c Config) engine() engine.Config {
	return engine.Config{
		Backend: c.Backend, Tenant: c.Tenant, KeyOwner: c.KeyOwner,
		Lease: c.Lease, Retention: c.Retention, WaitForInFlight: c.WaitForInFlight, KeyHeader: c.KeyHeader,
		MaxResponseBytes: c.MaxResponseBytes, MaxArgumentBytes: c.MaxArgumentBytes,
		Offset: c.Clock.Offset, MeterProvider: c.MeterProvider, TracerProvider: c.TracerProvider, Logger: c.Logger,
		RecoverAfter: c.RecoverAfter, AttemptTimeout: c.AttemptTimeout, TenantContext: c.TenantContext, Caller: c.Caller, CallerContext: c.CallerContext,
		NoOneStatement: c.NoOneStatementCreate,
	}
}

// ClockOffset is how far tests have moved the database clock as the hook
// sees it (Config.Clock). The zero value adds nothing. Tests move it
// forward to expire leases; production leaves it out.
type ClockOffset struct {
	offset atomic.Int64
}

// Advance moves the clock forward by d (backward when d is negative).
func (c *ClockOffset) Advance(d time.Duration) { c.offset.Add(int64(d)) }

// Offset returns how far the clock has been moved.
func (c *ClockOffset) Offset() time.Duration {
	if c == nil {
		return 0
	}
	return time.Duration(c.offset.Load())
}
