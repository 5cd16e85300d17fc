package testapp_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/goovo/idem"
	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/testkit"
	"github.com/goovo/idem/internal/testkit/testapp"
	"github.com/goovo/idem/internal/testkit/testapp/ent"
)

// A mutation marked @idempotent(recover: false) is never run again by the
// recoverer: its abandoned claim waits for its client, and past the
// retention window is stored as IDEMPOTENCY_ABANDONED, as is a recoverable
// claim whose runs kept failing.
func TestRecoverOptOut(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Backend) {
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
			if r := approve(field, key); r.Code() != string(idem.CodeInternal) {
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
		admin, err := idem.NewAdmin(idem.Config{Backend: be.Client.IdempotencyBackend(), Clock: be.Clock})
		if err != nil {
			t.Fatal(err)
		}
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
			if r := approve(field, key); r.Code() != string(idem.CodeAbandoned) {
				t.Fatalf("%s: %s", field, r.Body)
			}
		}
	})
}

// A claim keeps the operation the recoverer would run in lease mode only:
// an atomic claim commits with its result or not at all, so its claim
// carries none (and its record keeps none).
func TestAtomicClaimKeepsNoOperation(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Backend) {
		be := testapp.NewBench(t, b, idem.Config{})
		var mu sync.Mutex
		kept := map[string][]byte{}
		be.Resolver.Hook = func(ctx context.Context, _ *ent.Shipment) error {
			key, _ := idem.KeyFromContext(ctx)
			mu.Lock()
			defer mu.Unlock()
			kept[key] = idem.ClaimFromContext(ctx).Operation
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
