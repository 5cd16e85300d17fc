package testapp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/transport"

	"github.com/goovo/idem"
	"github.com/goovo/idem/idembackend"
	"github.com/goovo/idem/idemcode"
	"github.com/goovo/idem/idemctl"
	"github.com/goovo/idem/idemhttp"
	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/engine"
	"github.com/goovo/idem/internal/extension"
	"github.com/goovo/idem/internal/testkit"
	"github.com/goovo/idem/internal/testkit/testapp"
	"github.com/goovo/idem/internal/testkit/testapp/ent"
	"github.com/goovo/idem/internal/testkit/testapp/graph"
)

// A mutation marked @idempotent(recover: false) is never run again by the
// recoverer: its abandoned claim waits for its client, and past the
// retention window is stored as IDEMPOTENCY_ABANDONED, as is a recoverable
// claim whose runs kept failing.
func TestRecoverOptOut(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		var mu sync.Mutex
		runs := map[string]int{}
		be := testapp.NewBench(t, b, idem.Config{RecoverAfter: 100 * time.Millisecond, Retention: time.Hour})
		be.Resolver.Hook = func(ctx context.Context, _ *ent.Shipment) error {
			key, _ := idem.KeyFromContext(ctx)
			if key != "live" && key != "recoverable" {
				return nil
			}
			mu.Lock()
			defer mu.Unlock()
			runs[key]++
			return errors.New("the downstream system is down") // retryable
		}
		var created struct{ CreateShipment struct{ ID string } }
		if err := json.Unmarshal(be.Post("org-1", "ship", 1000).Data, &created); err != nil || created.CreateShipment.ID == "" {
			t.Fatalf("create: %v", err)
		}
		approve := func(field, key string) *testkit.Response {
			return be.GQL("org-1", `mutation($k: String!, $id: ID!) { `+field+`(idempotencyKey: $k, id: $id) { id } }`,
				map[string]any{"k": key, "id": created.CreateShipment.ID})
		}
		for field, key := range map[string]string{"approveShipmentLive": "live", "approveShipment": "recoverable"} {
			if r := approve(field, key); r.Code() != string(idemcode.InternalServerError) {
				t.Fatalf("%s: %s", field, r.Body)
			}
		}
		// Several rounds of the recoverer: until it has run the recoverable
		// claim twice (polled: a fixed sleep can be too short on a loaded
		// machine), the live claim being just as due in each of them.
		counts := func() (live, recoverable int) {
			mu.Lock()
			defer mu.Unlock()
			return runs["live"], runs["recoverable"]
		}
		testkit.Eventually(t, func() bool { _, recoverable := counts(); return recoverable >= 3 }, "the recoverable claim run twice by the recoverer")
		if live, recoverable := counts(); live != 1 || recoverable < 3 {
			t.Fatalf("runs: live %d (want 1: never recovered), recoverable %d (want the recoverer's too)", live, recoverable)
		}
		idemtest.RequireState(t, be.Client.IdempotencyBackend(), "org-1", "live", idemtest.Pending)

		be.Clock.Advance(2 * time.Hour) // past the retention window
		hook, err := idem.New(idem.Config{Backend: be.Client.IdempotencyBackend(), Clock: be.Clock})
		if err != nil {
			t.Fatal(err)
		}
		admin := idemctl.New(hook)
		for _, key := range []string{"live", "recoverable"} {
			testkit.Eventually(t, func() bool {
				recs, err := admin.Inspect(context.Background(), "org-1", key)
				if err != nil {
					t.Fatal(err)
				}
				return len(recs) == 1 && recs[0].State == idemtest.Failed
			}, "%s abandoned", key)
		}
		for field, key := range map[string]string{"approveShipmentLive": "live", "approveShipment": "recoverable"} {
			if r := approve(field, key); r.Code() != string(idemcode.Abandoned) {
				t.Fatalf("%s: %s", field, r.Body)
			}
		}
	})
}

// A claim keeps the operation the recoverer would run in lease mode only:
// an atomic claim commits with its result or not at all, so its claim
// carries none (and its record keeps none).
func TestAtomicClaimKeepsNoOperation(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		be := testapp.NewBench(t, b, idem.Config{})
		var mu sync.Mutex
		kept := map[string][]byte{}
		be.Resolver.Hook = func(ctx context.Context, _ *ent.Shipment) error {
			key, _ := idem.KeyFromContext(ctx)
			mu.Lock()
			defer mu.Unlock()
			kept[key] = idembackend.ClaimFromContext(ctx).Operation
			return nil
		}
		for _, field := range []string{"createShipmentLease", "createShipmentAtomic"} {
			r := be.GQL("org-1", `mutation($k: String!) { `+field+`(idempotencyKey: $k, input: {destination: "Lyon", weightGrams: 900}) { id } }`,
				map[string]any{"k": field})
			idemtest.RequireExecuted(t, r.Body, field)
		}
		mu.Lock()
		defer mu.Unlock()
		if op := kept["createShipmentLease"]; !strings.Contains(string(op), "createShipmentLease") {
			t.Errorf("lease claim's operation: %q", op)
		}
		if op, ran := kept["createShipmentAtomic"]; !ran || op != nil {
			t.Errorf("atomic claim's operation: %q (ran: %v), want none", op, ran)
		}
		if rec := be.Record("org-1", "createShipmentAtomic"); rec.IdempotencyOperation != nil && len(*rec.IdempotencyOperation) > 0 {
			t.Errorf("atomic record keeps an operation: %s", *rec.IdempotencyOperation)
		}
	})
}

// manualRecoverer serves be's application with the recoverer on but not
// running by itself: the test runs its rounds (Engine.Recover), so that it
// can count them. The engine is configured as idem.Config's defaults and
// NewBench would configure it, with cfg's RecoverAfter, Retention, Caller
// and CallerContext.
func manualRecoverer(t *testing.T, be *testapp.Bench, cfg idem.Config) *engine.Engine {
	t.Helper()
	srv := handler.New(graph.NewExecutableSchema(graph.Config{Resolvers: be.Resolver}))
	srv.AddTransport(transport.POST{})
	ecfg := engine.Config{
		Backend: be.Client.IdempotencyBackend(), Tenant: graph.OrgFromContext, Offset: be.Clock.Offset,
		Lease: idem.DefaultLease, Retention: cfg.Retention,
		MaxResponseBytes: idem.DefaultMaxResponseBytes, MaxArgumentBytes: idem.DefaultMaxArgumentBytes,
		Logger:       slog.New(slog.NewTextHandler(io.Discard, nil)),
		RecoverAfter: cfg.RecoverAfter, Caller: cfg.Caller, CallerContext: cfg.CallerContext,
	}
	if cfg.CallerContext == nil {
		ecfg.TenantContext = graph.OrgContext
	}
	eng, err := engine.New(ecfg)
	if err != nil {
		t.Fatal(err)
	}
	// The extensions Hook.Handler installs beside the engine.
	srv.Use(eng.KeyHeaderCheck())
	srv.Use(extension.Text{})
	srv.Use(extension.ErrorLimit{Max: 100})
	srv.Use(extension.Tenant{Of: graph.OrgFromContext})
	srv.Use(eng)
	h := idemhttp.Middleware(srv, idemhttp.Limits{})
	eng.SetHandler(h)
	be.Server.Config.Handler = graph.WithOrg(h)
	return eng
}

// The recoverer is fair. One tenant left 100 abandoned claims that can
// never run (@idempotent(recover: false): no operation kept) and 100 whose
// runs are refused every time (their user was deleted: CallerContext
// refuses them), all older than another tenant's abandoned claim. That
// claim is recovered in the first round; the first tenant's own runnable
// claim, behind its 100 refused ones, in the second. The claims that were
// not run are still pending, their leases ended: their clients' retries
// run them at once; past the horizon the recoverer abandons them.
func TestRecovererIsFair(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		// The test runs the recoverer's rounds itself (manualRecoverer).
		be := testapp.NewBench(t, b, idem.Config{RecoverAfter: idem.RecoverNever})
		var failing, revoked atomic.Bool
		be.Resolver.Hook = func(context.Context, *ent.Shipment) error {
			if failing.Load() {
				return errors.New("the downstream system is down") // retryable: released
			}
			return nil
		}
		const after = time.Minute
		ext := manualRecoverer(t, be, idem.Config{
			RecoverAfter: after, Retention: 24 * time.Hour,
			Caller: func(context.Context) []byte {
				if revoked.Load() {
					return []byte("deleted-user")
				}
				return []byte("user")
			},
			CallerContext: func(ctx context.Context, org string, caller []byte) (context.Context, error) {
				if string(caller) == "deleted-user" {
					return nil, errors.New("no such user")
				}
				return graph.OrgContext(ctx, org), nil
			},
		})
		shipment := func(org string) string {
			var created struct{ CreateShipment struct{ ID string } }
			if err := json.Unmarshal(be.Post(org, "ship-"+org, 1000).Data, &created); err != nil || created.CreateShipment.ID == "" {
				t.Fatalf("create %s: %v", org, err)
			}
			return created.CreateShipment.ID
		}
		ids := map[string]string{"mallory": shipment("mallory"), "acme": shipment("acme")}
		abandon := func(org, field, key string) {
			r := be.GQL(org, `mutation($k: String!, $id: ID!) { `+field+`(idempotencyKey: $k, id: $id) { id } }`,
				map[string]any{"k": key, "id": ids[org]})
			if r.Outcome(field) != idemcode.OutcomeReleased {
				t.Fatalf("%s %s: %s", org, key, r.Body)
			}
		}
		failing.Store(true)
		for i := range 100 {
			abandon("mallory", "approveShipmentLive", fmt.Sprintf("unrunnable-%03d", i))
		}
		revoked.Store(true)
		for i := range 100 {
			abandon("mallory", "approveShipment", fmt.Sprintf("refused-%03d", i))
		}
		revoked.Store(false)
		abandon("acme", "approveShipment", "acme-payment")
		abandon("mallory", "approveShipment", "mallory-own")
		failing.Store(false)
		be.Clock.Advance(after + time.Second) // every lease ended more than RecoverAfter ago

		hook, err := idem.New(idem.Config{Backend: be.Client.IdempotencyBackend()})
		if err != nil {
			t.Fatal(err)
		}
		admin := idemctl.New(hook)
		state := func(org, key string) string {
			recs, err := admin.Inspect(context.Background(), org, key)
			if err != nil || len(recs) != 1 {
				t.Fatalf("%s/%s: %+v %v", org, key, recs, err)
			}
			return recs[0].State
		}
		round := func() engine.RecoverReport {
			rep, err := ext.Recover(context.Background())
			if err != nil {
				t.Fatalf("round: %v", err)
			}
			return rep
		}
		rep := round()
		if s := state("acme", "acme-payment"); s != idemtest.Succeeded {
			t.Fatalf("another tenant's claim after the first round: %s (%+v), want succeeded", s, rep)
		}
		if s := state("mallory", "mallory-own"); s != idemtest.Pending {
			t.Fatalf("mallory's own claim after the first round: %s, want pending (behind its refused ones)", s)
		}
		rep = round()
		if s := state("mallory", "mallory-own"); s != idemtest.Succeeded || rep.Recovered != 1 {
			t.Fatalf("mallory's own claim after the second round: %s (%+v), want succeeded", s, rep)
		}
		// The claims not run wait for their clients, who take them over at once.
		if rep := round(); rep.Recovered != 0 {
			t.Fatalf("third round: %+v, want nothing to run", rep)
		}
		for _, key := range []string{"unrunnable-000", "refused-000"} {
			if s := state("mallory", key); s != idemtest.Pending {
				t.Fatalf("%s: %s, want pending", key, s)
			}
		}
		r := be.GQL("mallory", `mutation($k: String!, $id: ID!) { approveShipment(idempotencyKey: $k, id: $id) { id } }`,
			map[string]any{"k": "refused-001", "id": ids["mallory"]})
		idemtest.RequireExecuted(t, r.Body, "approveShipment")

		// Past the horizon, every claim left is abandoned, a batch a round.
		be.Clock.Advance(25 * time.Hour)
		abandoned := 0
		for range 3 {
			abandoned += round().Abandoned
		}
		if abandoned != 199 {
			t.Fatalf("%d claims abandoned past the horizon, want 199", abandoned)
		}
		if s := state("mallory", "unrunnable-099"); s != idemtest.Failed {
			t.Fatalf("unrunnable-099 past the horizon: %s, want failed", s)
		}
	})
}

// The recoverer's run that fails unexpectedly is logged as the recoverer's:
// no client got its INTERNAL_SERVER_ERROR.
func TestRecovererRunLoggedAsRecoverers(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		var mu sync.Mutex
		var logs strings.Builder
		logged := func() string {
			mu.Lock()
			defer mu.Unlock()
			return logs.String()
		}
		logger := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
			mu.Lock()
			defer mu.Unlock()
			return logs.Write(p)
		}), nil))
		be := testapp.NewBench(t, b, idem.Config{RecoverAfter: 100 * time.Millisecond, Retention: time.Hour, Logger: logger})
		be.Resolver.Hook = func(ctx context.Context, _ *ent.Shipment) error {
			return errors.New("the downstream system is down") // retryable: released
		}
		if r := be.Post("org-1", "down", 1000); r.Code() != string(idemcode.InternalServerError) {
			t.Fatalf("client's run: %s", r.Body)
		}
		const recoverers = "the recoverer's run of an abandoned claim failed with an unexpected error"
		testkit.Eventually(t, func() bool { return strings.Contains(logged(), recoverers) }, "the recoverer's failed run logged")
		if n := strings.Count(logged(), "the client got INTERNAL_SERVER_ERROR"); n != 1 {
			t.Fatalf("%d lines say a client got INTERNAL_SERVER_ERROR, want 1 (the client's own run):\n%s", n, logged())
		}
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
