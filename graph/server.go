package graph

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/extension"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"go.opentelemetry.io/otel/metric"

	"github.com/goovo/idem"
	"github.com/goovo/idem/ent"
	_ "github.com/goovo/idem/ent/runtime" // the idemschema mixin's interceptors
	"github.com/goovo/idem/idemhttp"
	"github.com/goovo/idem/internal/example/mailer"
	"github.com/goovo/idem/internal/example/provider"
)

// Options configure the example's hook (NewHook).
type Options struct {
	// Lease, WaitForInFlight and Retention are passed to the hook
	// (idem.Config).
	Lease           time.Duration
	WaitForInFlight time.Duration
	Retention       time.Duration
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Clock lets tests move the hook's view of the database clock.
	Clock *idem.ClockOffset
	// MeterProvider receives the hook's metrics (default: otel's global).
	MeterProvider metric.MeterProvider
	// RecoverAfter is how long after a lease ran out the server finishes
	// a claim whose client never came back (idem.Config.RecoverAfter): 0
	// takes the library's default, on (idem.DefaultRecoverAfter), since
	// the example runs a claim as its caller; idem.RecoverNever turns it
	// off. Done stops it.
	RecoverAfter time.Duration
	Done         <-chan struct{}
	// Limits bound each request (idemhttp.Limits: zero fields take their
	// defaults, negative ones turn a limit off).
	Limits idemhttp.Limits
}

// NewHook returns the example's idempotency hook: its one configuration,
// whose handler NewHandler serves and whose records the sweeper
// (idemctl.New(hook)) maintains with the same lease and retention.
func NewHook(client *ent.Client, opts Options) (*idem.Hook, error) {
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	return idem.New(idem.Config{
		Backend: client.IdempotencyBackend(),
		Tenant:  TenantFromContext,
		// A key belongs to the user (X-User-ID) who first sent it: another
		// user of the tenant gets IDEMPOTENCY_KEY_FORBIDDEN, not its answer.
		KeyOwner:        UserFromContext,
		Lease:           opts.Lease,
		WaitForInFlight: opts.WaitForInFlight,
		Retention:       opts.Retention,
		Logger:          logger,
		Clock:           opts.Clock,
		MeterProvider:   opts.MeterProvider,
		KeyHeader:       true, // generated with -key-header (generate.go): optional key arguments
		Limits:          opts.Limits,
		RecoverAfter:    opts.RecoverAfter,
		// The recoverer runs a claim as its tenant and user (X-User-ID).
		Caller:        Caller,
		CallerContext: CallerContext,
		Done:          opts.Done,
	})
}

// NewHandler returns the example's HTTP handler with hook (NewHook's) and
// mail, the mailer whose receipts Query.receipts lists:
// GraphQL at /query, with the idempotency hook and the X-Tenant-ID and
// X-User-ID authentication, a checkout page at /checkout/ (on the
// JavaScript client) and a playground at / (both from the binary); any
// other path is 404.
func NewHandler(client *ent.Client, prov provider.Provider, mail *mailer.Simulated, hook *idem.Hook) (http.Handler, error) {
	srv := handler.New(NewExecutableSchema(Config{Resolvers: &Resolver{client: client, provider: prov, mailer: mail,
		effects: effectsOf(client.IdempotencyBackend().Dialect())}}))
	srv.AddTransport(transport.POST{})
	// Parsed and validated operations are reused (a retry sends the same
	// document, and parsing is a seventh of a request's CPU) in the cache
	// hook.Handler sets: bounded in bytes by Options.Limits.
	srv.Use(extension.Introspection{})
	gql, err := hook.Handler(srv)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/query", TenantMiddleware(UserMiddleware(gql)))
	mux.Handle("/checkout/", checkoutHandler())
	page := playgroundHandler()
	mux.Handle("GET /{$}", page)
	mux.Handle("GET /playground.js", page)
	return mux, nil
}
