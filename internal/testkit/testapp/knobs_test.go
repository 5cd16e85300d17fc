package testapp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/goovo/idem"
	"github.com/goovo/idem/idemcode"
	"github.com/goovo/idem/idemctl"
	"github.com/goovo/idem/idemschema"
	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/testkit"
	"github.com/goovo/idem/internal/testkit/testapp"
	"github.com/goovo/idem/internal/testkit/testapp/ent"
	"github.com/goovo/idem/internal/testkit/testapp/ent/idempotencyarchive"
	"github.com/goovo/idem/internal/testkit/testapp/ent/idempotencyrecord"
	"github.com/goovo/idem/internal/testkit/testapp/graph"
)

// createStamped is createShipmentStamped, whose clientTime and
// input.createdAt are left out of the fingerprint.
const createStamped = `mutation($k: String!, $g: Int!, $t: String, $at: Time) {
	createShipmentStamped(idempotencyKey: $k, clientTime: $t, input: {destination: "Lyon", weightGrams: $g, createdAt: $at}) { id weightGrams createdAt }
}`

// A retry that changes only excluded fields (a client timestamp, a time in
// the input) replays the first result, as a retry; one that changes any
// other field is still refused as a reuse of the key.
func TestFingerprintExclusions(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		be := testapp.NewBench(t, b, idem.Config{})
		var calls atomic.Int32
		be.Resolver.Hook = func(context.Context, *ent.Shipment) error { calls.Add(1); return nil }
		send := func(grams int, clientTime, createdAt string) *testkit.Response {
			return be.GQL("org-1", createStamped, map[string]any{"k": "stamped", "g": grams, "t": clientTime, "at": createdAt})
		}
		first := send(100, "10:00:00.000", "2026-01-01T10:00:00Z")
		if len(first.Errors) > 0 || first.Idempotency["createShipmentStamped"].Outcome != idemcode.OutcomeExecuted {
			t.Fatalf("first: %s", first.Body)
		}
		retry := send(100, "10:00:05.250", "2026-01-01T10:00:05Z")
		if len(retry.Errors) > 0 || !retry.Replayed || !bytes.Equal(retry.Data, first.Data) ||
			retry.Idempotency["createShipmentStamped"].Outcome != idemcode.OutcomeReplayed {
			t.Fatalf("a retry that changed only excluded fields must replay the first result: %s (first %s)", retry.Body, first.Body)
		}
		if !strings.Contains(string(retry.Data), `"createdAt":"2026-01-01T10:00:00Z"`) {
			t.Fatalf("the replay must be the first result, its excluded field included: %s", retry.Data)
		}
		reused := send(101, "10:00:09.000", "2026-01-01T10:00:05Z")
		if reused.Code() != string(idemcode.KeyReused) || !strings.Contains(reused.Errors[0].Message, "arguments") {
			t.Fatalf("a changed field that is not excluded must be refused as a reuse: %s", reused.Body)
		}
		if n := calls.Load(); n != 1 {
			t.Fatalf("the resolver ran %d times, want 1", n)
		}
		if n := be.Count(); n != 1 {
			t.Fatalf("%d shipments, want 1", n)
		}
	})
}

// expiresAt reads a field's extensions.idempotency.expiresAt, and checks
// that it lies retention after the test's now, give or take the time the
// request took and the rounding to whole seconds.
func expiresAt(t *testing.T, r *testkit.Response, field string, sent time.Time, retention time.Duration) time.Time {
	t.Helper()
	raw := r.Idempotency[field].ExpiresAt
	at, err := time.Parse(time.RFC3339, raw)
	if err != nil {
		t.Fatalf("%s: expiresAt %q is not RFC 3339: %v\n%s", field, raw, err, r.Body)
	}
	if want := sent.Add(retention); at.Before(want.Add(-2*time.Second)) || at.After(time.Now().Add(retention)) {
		t.Fatalf("%s: expiresAt %s, want about %s (now + %s)", field, at, want, retention)
	}
	return at
}

// A mutation's own retention (@idempotent(retentionSeconds: 3600)) ends its
// records' replay window after an hour, while the other mutations of its
// record table keep the table's 24 hours; every answer that holds a result
// says when its key stops replaying (expiresAt), the expired key's message
// states the retention in force, and the sweeper archives the records
// once the table's retention has passed.
func TestRetentionPerMutation(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		be := testapp.NewBench(t, b, idem.Config{})
		sent := time.Now()
		created := be.Post("org-1", "ship", 100)
		if len(created.Errors) > 0 {
			t.Fatalf("create: %s", created.Body)
		}
		expiresAt(t, created, "createShipment", sent, idem.DefaultRetention)
		var d struct{ CreateShipment struct{ ID string } }
		if err := json.Unmarshal(created.Data, &d); err != nil || d.CreateShipment.ID == "" {
			t.Fatalf("create: %s %v", created.Data, err)
		}
		id := d.CreateShipment.ID

		approve := func(field, key string) *testkit.Response {
			return be.GQL("org-1", `mutation($k: String!, $id: ID!) { `+field+`(idempotencyKey: $k, id: $id) { id label } }`,
				map[string]any{"k": key, "id": id})
		}
		sent = time.Now()
		brief := approve("approveShipmentBrief", "brief")
		if len(brief.Errors) > 0 {
			t.Fatalf("brief: %s", brief.Body)
		}
		briefEnd := expiresAt(t, brief, "approveShipmentBrief", sent, time.Hour)
		long := approve("approveShipment", "long")
		if len(long.Errors) > 0 {
			t.Fatalf("long: %s", long.Body)
		}
		expiresAt(t, long, "approveShipment", sent, idem.DefaultRetention)

		be.Clock.Advance(time.Hour - time.Minute)
		r := approve("approveShipmentBrief", "brief")
		if !r.Replayed || !bytes.Equal(r.Data, brief.Data) {
			t.Fatalf("inside its hour: %s", r.Body)
		}
		if got := r.Idempotency["approveShipmentBrief"].ExpiresAt; got != briefEnd.Format(time.RFC3339) {
			t.Fatalf("a replay's expiresAt %s, the first answer's %s", got, briefEnd.Format(time.RFC3339))
		}

		be.Clock.Advance(2 * time.Minute)
		r = approve("approveShipmentBrief", "brief")
		if r.Code() != string(idemcode.KeyExpired) || !strings.Contains(r.Errors[0].Message, "kept for 1h ") {
			t.Fatalf("past its hour: %s", r.Body)
		}
		if got := r.Idempotency["approveShipmentBrief"].ExpiresAt; got != briefEnd.Format(time.RFC3339) {
			t.Fatalf("an expired key's expiresAt %s, want %s", got, briefEnd.Format(time.RFC3339))
		}
		if r := approve("approveShipment", "long"); !r.Replayed {
			t.Fatalf("the table's other mutation keeps its 24h: %s", r.Body)
		}

		// An Admin that knows no schema (its hook never served: a
		// standalone idemctl) archives by the table's retention, the upper
		// bound of its mutations'.
		report, err := admin(t, be).Sweep(context.Background(), idemctl.SweepOptions{})
		if err != nil || report.Archived() != 0 {
			t.Fatalf("a sweep that knows no schema, inside the table's retention: %+v %v", report, err)
		}
		// The server's sweeper (an Admin of the serving hook) archives the
		// short-lived record past its own retention, and keeps the others.
		want := []idem.MutationRetention{{Mutation: "Mutation.approveShipmentBrief", Entity: "IdempotencyRecord", Retention: time.Hour}}
		if rs, read := be.Hook.MutationRetentions(); !read || !slices.Equal(rs, want) {
			t.Fatalf("the serving hook's mutation retentions: %+v %v, want %+v", rs, read, want)
		}
		served := idemctl.New(be.Hook)
		dry, err := served.Sweep(context.Background(), idemctl.SweepOptions{DryRun: true})
		if err != nil || dry.Archived() != 1 {
			t.Fatalf("dry run past the mutation's retention: %+v %v", dry, err)
		}
		report, err = served.Sweep(context.Background(), idemctl.SweepOptions{})
		if err != nil || report.Archived() != 1 || report.Purged() != 0 {
			t.Fatalf("sweep past the mutation's retention: %+v %v", report, err)
		}
		ctx := idemschema.IncludeUnfinished(context.Background())
		if rec, err := be.Client.IdempotencyRecord.Query().Where(idempotencyrecord.IdempotencyKey("brief")).Only(ctx); err != nil || rec.IdempotencyArchivedAt == nil {
			t.Fatalf("the short-lived record is no tombstone: %+v %v", rec, err)
		}
		if rec, err := be.Client.IdempotencyRecord.Query().Where(idempotencyrecord.IdempotencyKey("long")).Only(ctx); err != nil || rec.IdempotencyArchivedAt != nil {
			t.Fatalf("the table's other mutation's record was archived: %+v %v", rec, err)
		}
		if archived, err := be.Client.IdempotencyArchive.Query().Where(idempotencyarchive.IdempotencyKey("brief")).Count(ctx); err != nil || archived != 1 {
			t.Fatalf("the archive holds %d copies of the short-lived record (%v)", archived, err)
		}
		if r := approve("approveShipmentBrief", "brief"); r.Code() != string(idemcode.KeyExpired) || !strings.Contains(r.Errors[0].Message, "kept for 1h ") {
			t.Fatalf("archived by its mutation's retention: %s", r.Body)
		}
		if r := approve("approveShipment", "long"); !r.Replayed || !bytes.Equal(r.Data, long.Data) {
			t.Fatalf("the table's other mutation after the sweep: %s", r.Body)
		}
		if r := be.Post("org-1", "ship", 100); !r.Replayed {
			t.Fatalf("the other table after the sweep: %s", r.Body)
		}
		if again, err := served.Sweep(context.Background(), idemctl.SweepOptions{}); err != nil || again.Archived() != 0 {
			t.Fatalf("a second sweep: %+v %v", again, err)
		}
		// A later record of the mutation: the next pass reads from where
		// the last one ended, and takes it once its hour has passed.
		if r := approve("approveShipmentBrief", "brief-2"); len(r.Errors) > 0 {
			t.Fatalf("brief-2: %s", r.Body)
		}
		be.Clock.Advance(time.Hour - time.Minute)
		if r, err := served.Sweep(context.Background(), idemctl.SweepOptions{}); err != nil || r.Archived() != 0 {
			t.Fatalf("a sweep inside brief-2's hour: %+v %v", r, err)
		}
		be.Clock.Advance(2 * time.Minute)
		if r, err := served.Sweep(context.Background(), idemctl.SweepOptions{}); err != nil || r.Archived() != 1 {
			t.Fatalf("a sweep past brief-2's hour: %+v %v", r, err)
		}
		if r := approve("approveShipment", "long"); !r.Replayed {
			t.Fatalf("the table's other mutation, two hours on: %s", r.Body)
		}

		be.Clock.Advance(idem.DefaultRetention)
		report, err = served.Sweep(context.Background(), idemctl.SweepOptions{})
		if err != nil || report.Archived() != 2 {
			t.Fatalf("sweep past the table's retention: %+v %v", report, err)
		}
		if r := approve("approveShipmentBrief", "brief"); r.Code() != string(idemcode.KeyExpired) || !strings.Contains(r.Errors[0].Message, "kept for 1h ") {
			t.Fatalf("archived: %s", r.Body)
		}
		if r := approve("approveShipment", "long"); r.Code() != string(idemcode.KeyExpired) || !strings.Contains(r.Errors[0].Message, "kept for 24h ") {
			t.Fatalf("archived, the table's retention: %s", r.Body)
		}

		// The short-lived record's tombstone, archived early, keeps its key
		// for a horizon after its archiving, whichever sweeper purges.
		rec, err := be.Client.IdempotencyRecord.Query().Where(idempotencyrecord.IdempotencyKey("brief")).Only(ctx)
		if err != nil || rec.IdempotencyArchivedAt == nil {
			t.Fatalf("brief: %+v %v", rec, err)
		}
		be.Clock.Advance(rec.IdempotencyArchivedAt.Add(idem.DefaultTombstoneHorizon - time.Minute).Sub(time.Now().Add(be.Clock.Offset())))
		for _, a := range []*idemctl.Admin{served, admin(t, be)} {
			if dry, err := a.Sweep(context.Background(), idemctl.SweepOptions{DryRun: true}); err != nil || dry.Purged() != 0 {
				t.Fatalf("a minute before a horizon after the archiving: %+v %v", dry, err)
			}
		}
		if r := approve("approveShipmentBrief", "brief"); r.Code() != string(idemcode.KeyExpired) {
			t.Fatalf("a minute before the horizon: %s", r.Body)
		}
		be.Clock.Advance(2 * time.Minute)
		if dry, err := served.Sweep(context.Background(), idemctl.SweepOptions{DryRun: true}); err != nil || dry.Purged() != 1 {
			t.Fatalf("a minute past a horizon after the archiving: %+v %v", dry, err)
		}
	})
}

// A mutation's retention may not exceed its record table's, which the
// sweeper archives by: the server refuses to start, naming both.
func TestRetentionLongerThanTheTableIsRefused(t *testing.T) {
	db := idemtest.Open(t, idemtest.SQLite)
	client := ent.NewClient(ent.Driver(db.Driver))
	hook, err := idem.New(idem.Config{Backend: client.IdempotencyBackend(), Tenant: graph.OrgFromContext, Retention: 30 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	_, err = hook.Handler(handler.New(graph.NewExecutableSchema(graph.Config{Resolvers: &graph.Resolver{Client: client}})))
	if err == nil || !strings.Contains(err.Error(), "approveShipmentBrief") || !strings.Contains(err.Error(), "retentionSeconds: 3600 (1h) exceeds the retention of its record entity IdempotencyRecord (30m)") {
		t.Fatalf("got %v", err)
	}
}

// withSchema serves an executable schema under another schema: a schema
// written by hand, which no generation checked.
type withSchema struct {
	graphql.ExecutableSchema
	schema *ast.Schema
}

func (w withSchema) Schema() *ast.Schema { return w.schema }

// A fingerprintExclude path that is not an argument of its mutation, in a
// schema that generation did not check, stops the server from starting,
// naming the mutation and the path.
func TestExclusionOfAMissingPathIsRefusedAtStart(t *testing.T) {
	db := idemtest.Open(t, idemtest.SQLite)
	client := ent.NewClient(ent.Driver(db.Driver))
	es := graph.NewExecutableSchema(graph.Config{Resolvers: &graph.Resolver{Client: client}})
	orig := es.Schema()
	mutation := *orig.Mutation
	mutation.Fields = nil
	for _, f := range orig.Mutation.Fields {
		if f.Name == "createShipmentStamped" {
			cp := *f
			cp.Directives = ast.DirectiveList{{Name: "idempotent", Arguments: ast.ArgumentList{
				{Name: "record", Value: &ast.Value{Kind: ast.StringValue, Raw: "Shipment"}},
				{Name: "fingerprintExclude", Value: &ast.Value{Kind: ast.ListValue, Children: ast.ChildValueList{
					{Value: &ast.Value{Kind: ast.StringValue, Raw: "input.clientTme"}},
				}}},
			}}}
			f = &cp
		}
		mutation.Fields = append(mutation.Fields, f)
	}
	schema := *orig
	schema.Mutation = &mutation
	hook, err := idem.New(idem.Config{Backend: client.IdempotencyBackend(), Tenant: graph.OrgFromContext})
	if err != nil {
		t.Fatal(err)
	}
	_, err = hook.Handler(handler.New(withSchema{es, &schema}))
	if err == nil || !strings.Contains(err.Error(), `Mutation.createShipmentStamped: fingerprintExclude: "input.clientTme": input (CreateShipmentInput) has no field clientTme`) {
		t.Fatalf("got %v", err)
	}
}
