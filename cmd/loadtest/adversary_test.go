package main

import (
	"strings"
	"testing"
	"time"

	"github.com/goovo/idem/internal/testkit/hostile"
)

// With the limits on, the adversary fails the run on an answer the limits
// should have prevented: tenant B without its result, a hostile request
// that was not refused.
func TestAdversaryVerdict(t *testing.T) {
	ph := &adversaryPhase{
		name:    "under 45,000 aliases",
		victims: map[string]*timings{"createOrder": {}, "createPayment": {}},
		attacks: []string{"45,000 aliases"},
		sent:    map[string]*timings{"45,000 aliases": {}},
		want:    map[string]string{"45,000 aliases": "OPERATION_LIMIT_EXCEEDED"},
	}
	ph.victims["createOrder"].add(time.Millisecond, "ok")
	ph.victims["createPayment"].add(time.Millisecond, "ok")
	ph.sent["45,000 aliases"].add(time.Millisecond, "OPERATION_LIMIT_EXCEEDED")
	r := &adversaryReport{phases: []*adversaryPhase{ph}}
	if got := r.unexpected("sqlite"); len(got) != 0 {
		t.Fatalf("expected answers judged wrong: %q", got)
	}
	ph.victims["createOrder"].add(5*time.Second, "IDEMPOTENCY_UNAVAILABLE")
	ph.sent["45,000 aliases"].add(20*time.Second, "ok")
	got := r.unexpected("sqlite")
	if len(got) != 2 || !strings.Contains(got[0], "tenant B's createOrder: 1 answers other than \"ok\"") ||
		!strings.Contains(got[1], "tenant A's 45,000 aliases: 1 answers") {
		t.Fatalf("verdict %q", got)
	}
}

// The most expensive allowed payment is within the default limits, which
// the server checks (the run fails otherwise); here, that it is a tree of
// aliases below the alias limit.
func TestExpensivePaymentShape(t *testing.T) {
	q := hostile.ExpensivePayment("k", "1")
	if n := strings.Count(q, "x: "); n != 63 {
		t.Fatalf("%d aliases, want 63 (a binary tree of 7 levels)", n)
	}
}
