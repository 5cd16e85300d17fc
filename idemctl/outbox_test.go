package idemctl_test

import (
	"context"
	"errors"
	"regexp"
	"testing"

	"github.com/goovo/idem"
	"github.com/goovo/idem/idemoutbox"
	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/testkit"
	"github.com/goovo/idem/internal/testkit/testapp/ent"
)

type noteArgs struct{}

func (noteArgs) Kind() string { return "note" }

// idemctl outbox shows the effects that wait: the jobs of the mutations
// that committed, none of those that failed.
func TestOutbox(t *testing.T) {
	testkit.EachRiver(t, func(t *testing.T, b idemtest.Kind) {
		be := newBench(t, b)
		if err := idemoutbox.Migrate(context.Background(), be.DB.Driver.DB(), be.DB.Driver.Dialect()); err != nil {
			t.Fatal(err)
		}
		if text := be.run("outbox").ok(t).stdout; text != "No jobs.\n" {
			t.Fatalf("outbox before any job: %q", text)
		}
		be.Resolver.Hook = func(ctx context.Context, _ *ent.Shipment) error {
			if _, err := idemoutbox.Enqueue(ctx, noteArgs{}, nil); err != nil {
				return err
			}
			if keyOf(ctx) == "failed" {
				return idem.Final(errors.New("no"))
			}
			return nil
		}
		for _, k := range []string{"a", "b", "failed"} {
			be.Post("org-1", k, 100)
		}
		var doc []idemoutbox.KindStats
		be.run("-json", "outbox").ok(t).json(t, &doc)
		if len(doc) != 1 || doc[0].Kind != "note" || doc[0].Waiting != 2 || doc[0].Failed != 0 {
			t.Fatalf("outbox: %+v, want 2 note jobs waiting", doc)
		}
		text := be.run("outbox").ok(t).stdout
		for _, re := range []string{
			`(?m)^KIND +WAITING +RUNNING +RETRYING +FAILED +COMPLETED +OLDEST WAITING$`,
			`(?m)^note +2 +0 +0 +0 +0 +\S+ ago$`,
		} {
			if !regexp.MustCompile(re).MatchString(text) {
				t.Fatalf("outbox does not match %s:\n%s", re, text)
			}
		}
	})
}
