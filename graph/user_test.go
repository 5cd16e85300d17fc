package graph_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/goovo/idem/graph"
	"github.com/goovo/idem/idemtest"
)

// The example's user header is read once: sent twice, or malformed, the
// request is refused before anything runs, instead of acting for one of
// the users named.
func TestUserHeaderIsSentOnce(t *testing.T) {
	a := newApp(t, idemtest.SQLite)
	order := a.newOrder("acme", 300)
	for name, users := range map[string][]string{"twice": {"alice", "bob"}, "malformed": {"al ice"}} {
		r, err := a.Send("acme", createPayment, map[string]any{"key": "user-" + name, "order": order, "amount": 300},
			http.Header{graph.UserHeader: users})
		if err != nil || r.Status != http.StatusUnauthorized || r.Code() != "UNAUTHENTICATED" || !strings.Contains(r.Errors[0].Message, graph.UserHeader) {
			t.Fatalf("%s: %v %d %s", name, err, r.Status, r.Body)
		}
		if cs := a.charges("acme", order); len(cs) != 0 {
			t.Fatalf("%s: charged %+v", name, cs)
		}
	}
	r, err := a.Send("acme", createPayment, map[string]any{"key": "user-once", "order": order, "amount": 300},
		http.Header{graph.UserHeader: {"alice"}})
	if err != nil || len(r.Errors) > 0 {
		t.Fatalf("once: %v %s", err, r.Body)
	}
	if cs := a.charges("acme", order); len(cs) != 1 || cs[0].RequestedBy != "alice" {
		t.Fatalf("charges %+v, want one requested by alice", cs)
	}
}
