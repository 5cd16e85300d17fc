package graph_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/goovo/idem/graph"
	"github.com/goovo/idem/idemcode"
	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/testkit"
)

// A key belongs to the user (X-User-ID) who first sent it: another user of
// the same tenant who sends it, with the same arguments or others, is
// refused with IDEMPOTENCY_KEY_FORBIDDEN and the same bytes either way,
// learning nothing of alice's payment (neither its answer nor whether the
// arguments differ), and nothing is charged; so is a request that names no
// user. alice's own retry replays her answer.
func TestKeyBelongsToItsUser(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		a := newApp(t, b)
		order := a.newOrder("acme", 300)
		send := func(header http.Header, amount int) *testkit.Response {
			t.Helper()
			r, err := a.Send("acme", createPayment, map[string]any{"key": "alice-pays", "order": order, "amount": amount}, header)
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
		alice := http.Header{graph.UserHeader: {"alice"}}
		first := send(alice, 300)
		if len(first.Errors) > 0 {
			t.Fatalf("alice: %s", first.Body)
		}
		var refusals []string
		for _, c := range []struct {
			name   string
			header http.Header
			amount int
		}{
			{"bob, the same arguments", http.Header{graph.UserHeader: {"bob"}}, 300},
			{"bob, other arguments", http.Header{graph.UserHeader: {"bob"}}, 301},
			{"no user", http.Header{}, 300},
		} {
			r := send(c.header, c.amount)
			if r.Code() != string(idemcode.KeyForbidden) || r.Replayed || len(r.Data) > 0 && string(r.Data) != "null" ||
				!strings.Contains(r.Errors[0].Message, "belongs to another caller") {
				t.Fatalf("%s: %s", c.name, r.Body)
			}
			refusals = append(refusals, string(r.Body))
		}
		if refusals[0] != refusals[1] {
			t.Fatalf("bob's refusals tell the arguments apart:\n%s\n%s", refusals[0], refusals[1])
		}
		if cs := a.charges("acme", order); len(cs) != 1 || cs[0].RequestedBy != "alice" {
			t.Fatalf("charges %+v, want alice's one", cs)
		}
		again := send(alice, 300)
		if len(again.Errors) > 0 || string(again.Data) != string(first.Data) {
			t.Fatalf("alice's retry: %s", again.Body)
		}
		idemtest.RequireReplayed(t, again.Body, "createPayment")
	})
}
