package engine

import (
	"fmt"
	"testing"
	"time"
)

// Issue 32: the recoverer's memory of failed runs is bounded. An entry
// whose claim another process finished is never dropped by this one, so
// claims that fail here and finish elsewhere grew the map for good. Past
// the bound, the entries longest due go, and the latest failures keep
// their backoff.
func TestRecoveryRetriesAreBounded(t *testing.T) {
	var r recovery
	now := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
	n := maxRecoveryRetries + 2500
	for i := range n {
		r.failed(fmt.Sprint("claim-", i), now.Add(time.Duration(i)*time.Millisecond), time.Second)
	}
	if got := len(r.retries); got > maxRecoveryRetries {
		t.Fatalf("%d failed claims left %d entries; the bound is %d", n, got, maxRecoveryRetries)
	}
	last := fmt.Sprint("claim-", n-1)
	if r.due(last, now.Add(time.Duration(n-1)*time.Millisecond)) {
		t.Fatalf("the latest failure lost its backoff")
	}
	if !r.due("claim-0", now) {
		t.Fatalf("a forgotten claim is not due")
	}
}
