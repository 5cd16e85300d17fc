package idemctl_test

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/goovo/idem"
	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/testkit"
)

// A record's expiry is fixed when its answer is given: an idemctl started
// with a shorter retention than the server that answered (issue 31:
// `idemctl -retention 10s sweep` archived 29,985 records promised 24 h)
// archives none of them before their expiresAt, and says that its
// settings disagree with the records. Once the promise ends it archives
// them.
func TestSweepHonoursThePromisedExpiry(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		be := newBench(t, b)
		keys := []string{"a", "b", "c"}
		for _, k := range keys {
			r := be.ship("org-1", k)
			if r.Idempotency["createShipment"].ExpiresAt == "" {
				t.Fatalf("no expiresAt in the answer: %s", r.Body)
			}
		}
		be.Clock.Advance(time.Minute)

		var doc sweepDoc
		be.run("-json", "-retention", "10s", "sweep").ok(t).json(t, &doc)
		promised := 0
		for _, ts := range doc.Tables {
			promised += ts.Promised
		}
		if doc.Archived != 0 || promised != len(keys) {
			t.Fatalf("-retention 10s, a minute after answers promised for %v: archived %d, kept as promised %d, want 0 and %d: %+v",
				idem.DefaultRetention, doc.Archived, promised, len(keys), doc)
		}
		text := be.run("-retention", "10s", "sweep").ok(t).stdout
		if !regexp.MustCompile(`(?m)^Kept 3 responses past this idemctl's retention \(10s\): their answers promised them until \S+; the retention that answered them is longer than -retention\.$`).MatchString(text) {
			t.Fatalf("the disagreement is not reported:\n%s", text)
		}
		for _, k := range keys {
			if r := be.ship("org-1", k); r.Outcome("createShipment") != "replayed" {
				t.Fatalf("key %s within its promise: %s", k, r.Body)
			}
		}

		be.Clock.Advance(idem.DefaultRetention)
		doc = sweepDoc{}
		be.run("-json", "-retention", "10s", "sweep").ok(t).json(t, &doc)
		if doc.Archived != len(keys) {
			t.Fatalf("past the promise: archived %d, want %d: %+v", doc.Archived, len(keys), doc)
		}
		if text := be.run("-retention", "10s", "sweep").ok(t).stdout; strings.Contains(text, "Kept") {
			t.Fatalf("nothing is kept past its promise:\n%s", text)
		}
	})
}
