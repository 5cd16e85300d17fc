package idemtest

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/goovo/idem"
	"github.com/goovo/idem/idembackend"
	"github.com/goovo/idem/idemcode"
	"github.com/goovo/idem/idemctl"
)

// Record states RequireState checks, as idemctl.RecordInfo.State spells them.
const (
	Pending   = "pending"
	Succeeded = "succeeded"
	Failed    = "failed"
	// Tombstone is a record whose response the sweeper archived.
	Tombstone = "tombstone"
)

// RequireState fails t unless the record of (tenant, key) in backend's
// record tables is in state. Use it to assert what a mutation left behind:
// that a key was claimed and is still pending, that its result was stored,
// or that a failure was.
func RequireState(t testing.TB, backend idembackend.Backend, tenant, key, state string) {
	t.Helper()
	hook, err := idem.New(idem.Config{Backend: backend})
	if err != nil {
		t.Fatalf("idemtest: %v", err)
	}
	records, err := idemctl.New(hook).Inspect(context.Background(), tenant, key)
	if err != nil {
		t.Fatalf("idemtest: inspect %s/%s: %v", tenant, key, err)
	}
	var states []string
	for _, r := range records {
		if r.State == "archived" {
			continue
		}
		if r.State == state {
			return
		}
		states = append(states, r.Entity+":"+r.State)
	}
	if len(states) == 0 {
		t.Fatalf("idemtest: no record of key %q of tenant %q, want one %s", key, tenant, state)
	}
	t.Fatalf("idemtest: key %q of tenant %q is %s, want %s", key, tenant, strings.Join(states, ", "), state)
}

// Outcome returns what a GraphQL response body says happened to the
// idempotent field of response name field (idemcode.OutcomeExecuted,
// OutcomeReplayed, OutcomeReleased, OutcomeRefused), or "" if it says
// nothing of it.
func Outcome(t testing.TB, body []byte, field string) string {
	t.Helper()
	var resp struct {
		Extensions struct {
			Idempotency map[string]idemcode.FieldReport `json:"idempotency"`
		} `json:"extensions"`
	}
	if err := json.Unmarshal(body, &resp); err != nil {
		t.Fatalf("idemtest: response is not JSON: %v", err)
	}
	return resp.Extensions.Idempotency[field].Outcome
}

// RequireReplayed fails t unless the response body says field was
// replayed from its record.
func RequireReplayed(t testing.TB, body []byte, field string) {
	t.Helper()
	if got := Outcome(t, body, field); got != idemcode.OutcomeReplayed {
		t.Fatalf("idemtest: %s was %q, want replayed; response: %s", field, got, body)
	}
}

// RequireExecuted fails t unless the response body says field ran and its
// result was stored.
func RequireExecuted(t testing.TB, body []byte, field string) {
	t.Helper()
	if got := Outcome(t, body, field); got != idemcode.OutcomeExecuted {
		t.Fatalf("idemtest: %s was %q, want executed; response: %s", field, got, body)
	}
}
