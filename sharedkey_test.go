package idem_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/goovo/idem"
	"github.com/goovo/idem/idemcode"
	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/testkit/testapp/ent"
)

// One key named by two idempotent fields of one operation is refused
// before anything runs, whatever the fields' record entities (one key is
// one intent), and leaves nothing under the key: the key still works for a
// request that names it once. Run, the first field would store its result
// and the second would be refused, so that no retry of the operation could
// ever be answered whole.
func TestOneKeyForTwoFieldsIsRefusedBeforeAnythingRuns(t *testing.T) {
	onEveryBackend(t, func(t *testing.T, b idemtest.Kind) {
		be, _ := loggedBench(t, b, idem.Config{KeyHeader: true})
		var runs atomic.Int32
		be.Resolver.Hook = func(context.Context, *ent.Shipment) error { runs.Add(1); return nil }
		const ship = `input: {destination: "Lyon", weightGrams: 100}) { id }`
		cases := []struct {
			name, query string
			vars        map[string]any
			header      http.Header
		}{
			{name: "one mutation twice, aliased",
				query: `mutation { a: createShipment(idempotencyKey: "dup", ` + ship + ` b: createShipment(idempotencyKey: "dup", ` + ship + ` }`},
			{name: "through one variable",
				query: `mutation($k: String!) { a: createShipment(idempotencyKey: $k, ` + ship + ` b: createShipment(idempotencyKey: $k, ` + ship + ` }`,
				vars:  map[string]any{"k": "dup"}},
			{name: "two fields of different record entities",
				query: `mutation { a: createShipment(idempotencyKey: "dup", ` + ship + `
					b: approveShipment(idempotencyKey: "dup", id: "6f1c9a52-7f0e-4a7b-9a53-3b1d2c4e5f60") { id } }`},
			{name: "the header for one field, the argument for the other",
				query:  `mutation { a: createShipment(idempotencyKey: "dup", ` + ship + ` b: createShipment(idempotencyKey: "other", ` + ship + ` }`,
				header: http.Header{idemcode.HeaderKey: {`"dup"`}}},
		}
		for _, c := range cases {
			r := send(t, be, "org-1", c.query, c.vars, c.header)
			if len(r.Errors) != 1 || r.Code() != string(idemcode.KeyInvalid) || string(r.Data) != "null" {
				t.Errorf("%s: %s", c.name, r.Body)
			}
		}
		if n := be.Count(); n != 0 || runs.Load() != 0 {
			t.Fatalf("refused operations stored %d shipments and ran %d resolvers", n, runs.Load())
		}
		// Nothing is stored under the key: named once, it runs.
		if r := be.Post("org-1", "dup", 100); len(r.Errors) > 0 || r.Outcome("createShipment") != idemcode.OutcomeExecuted {
			t.Fatalf("the key after the refusals: %s", r.Body)
		}
		// Two keys, two fields: both run, and a retry replays both.
		two := `mutation { a: createShipment(idempotencyKey: "k-a", ` + ship + ` b: createShipment(idempotencyKey: "k-b", ` + ship + ` }`
		first, again := send(t, be, "org-1", two, nil, nil), send(t, be, "org-1", two, nil, nil)
		if len(first.Errors) > 0 || first.Idempotency["b"].Outcome != idemcode.OutcomeExecuted ||
			again.Idempotency["a"].Outcome != idemcode.OutcomeReplayed || string(again.Data) != string(first.Data) {
			t.Fatalf("two keys:\n%s\n%s", first.Body, again.Body)
		}
		if r := send(t, be, "org-1", `mutation { a: createShipment(idempotencyKey: "dup", `+ship+` b: createShipment(idempotencyKey: "dup", `+ship+` }`, nil, nil); !strings.Contains(r.Errors[0].Message, "key of b is also the key of a") {
			t.Fatalf("the refusal does not name the fields: %s", r.Body)
		}
	})
}
