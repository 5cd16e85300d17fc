package idemctl_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/goovo/idem"
	"github.com/goovo/idem/idembackend"
	"github.com/goovo/idem/idemcode"
	"github.com/goovo/idem/idemctl"
	"github.com/goovo/idem/idemdb"
	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/testkit"
	"github.com/goovo/idem/internal/testkit/testapp"
	"github.com/goovo/idem/internal/testkit/testapp/ent"
)

// bench is the test application (testapp.Bench), with the command line
// over the same database and clock.
type bench struct {
	*testapp.Bench
	t testing.TB
}

func newBench(t testing.TB, b idemtest.Kind) *bench {
	t.Helper()
	return &bench{Bench: testapp.NewBench(t, b, idem.Config{Logger: quiet}), t: t}
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// run runs the command line in-process, against the bench's database, with
// its clock.
func (be *bench) run(args ...string) cli {
	return runCommand(idemctl.Command{Config: be.cliConfig()}, args...)
}

// cliConfig is the command line's configuration: the bench's database and
// clock.
func (be *bench) cliConfig() idem.Config {
	return idem.Config{Backend: be.Client.IdempotencyBackend(), Clock: be.Clock, Logger: quiet}
}

type cli struct {
	code           int
	stdout, stderr string
}

func runCommand(c idemctl.Command, args ...string) cli {
	var out, errb bytes.Buffer
	code := c.Run(context.Background(), args, &out, &errb)
	return cli{code: code, stdout: out.String(), stderr: errb.String()}
}

func (r cli) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// ok checks a successful run: exit 0, and nothing on stderr but a sweep's
// progress lines.
func (r cli) ok(t testing.TB) cli {
	t.Helper()
	if r.code != idemctl.ExitOK || sweepProgress.ReplaceAllString(r.stderr, "") != "" {
		t.Fatalf("want success:\n%s", r)
	}
	return r
}

// sweepProgress matches the lines a sweep prints on stderr once it has run
// for a second, which a loaded machine's sweep of a few records may reach.
var sweepProgress = regexp.MustCompile(`(?m)^idemctl sweep: (\d+ archived, \d+ purged so far \(now \w+\), [\d.]+ records/s, [\d.hms]+|done)\n`)

// fails checks a failed run: the exit code, nothing on stdout (unless
// allowed), and one line on stderr matching pattern.
func (r cli) fails(t testing.TB, code int, pattern string) {
	t.Helper()
	if r.code != code {
		t.Fatalf("want exit %d:\n%s", code, r)
	}
	if strings.Count(r.stderr, "\n") != 1 || !strings.HasSuffix(r.stderr, "\n") {
		t.Fatalf("want one line on stderr:\n%s", r)
	}
	if !regexp.MustCompile(pattern).MatchString(r.stderr) {
		t.Fatalf("stderr does not match %q:\n%s", pattern, r)
	}
	if strings.Contains(r.stderr, "goroutine") || strings.Contains(r.stderr, "panic") {
		t.Fatalf("a stack on stderr:\n%s", r)
	}
}

func (r cli) json(t testing.TB, v any) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("decode: %v\n%s", err, r)
	}
	if dec.More() {
		t.Fatalf("more than one JSON document:\n%s", r)
	}
}

// ship creates a shipment of 100 g as org, with key.
func (be *bench) ship(org, key string) *testkit.Response {
	be.t.Helper()
	r := be.Post(org, key, 100)
	if len(r.Errors) > 0 {
		be.t.Fatalf("createShipment %s: %s", key, r.Body)
	}
	return r
}

// field returns the data of the response's only field, as stored.
func field(t testing.TB, r *testkit.Response) json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(r.Data, &m); err != nil || len(m) != 1 {
		t.Fatalf("data %s: %v", r.Data, err)
	}
	for _, v := range m {
		return v
	}
	return nil
}

func idOf(t testing.TB, r *testkit.Response) string {
	var s struct{ ID string }
	_ = json.Unmarshal(field(t, r), &s)
	if s.ID == "" {
		t.Fatalf("no id: %s", r.Body)
	}
	return s.ID
}

func compact(t testing.TB, raw []byte) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		t.Fatalf("compact %s: %v", raw, err)
	}
	return b.String()
}

type inspected struct {
	Tenant  string
	Key     string
	Records []struct {
		idemctl.RecordInfo
		Retry string `json:"retry"`
	}
}

// inspect finds every record of a key, in every record table and in the
// archive, in text and in JSON, through the record's life: replayable,
// expired, archived.
func TestInspect(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		be := newBench(t, b)
		created := be.ship("org-1", "same-key")
		// The same key in another record table: approveShipment's records
		// are IdempotencyRecord rows.
		approved := be.GQL("org-1", `mutation($k: String!, $id: ID!) { approveShipment(idempotencyKey: $k, id: $id) { id label } }`,
			map[string]any{"k": "same-key", "id": idOf(t, created)})
		if len(approved.Errors) > 0 {
			t.Fatalf("approve: %s", approved.Body)
		}
		be.ship("org-2", "same-key") // another tenant's

		text := be.run("inspect", "-tenant", "org-1", "-key", "same-key").ok(t).stdout
		for _, want := range []string{
			`tenant "org-1", key "same-key": 2 records`,
			"IdempotencyRecord (table idempotency_records): succeeded",
			"Shipment (table shipments): succeeded",
			"Mutation.createShipment", "Mutation.approveShipment",
			compact(t, field(t, created)), compact(t, field(t, approved)),
			"a retry gets  replays the stored response until ",
			"finished by   its client",
		} {
			if !strings.Contains(text, want) {
				t.Fatalf("inspect lacks %q:\n%s", want, text)
			}
		}
		if !regexp.MustCompile(`claimed +\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \(\d+ms ago\)`).MatchString(text) {
			t.Fatalf("times are not RFC 3339 UTC with an age:\n%s", text)
		}

		var doc inspected
		be.run("-json", "inspect", "-tenant", "org-1", "-key", "same-key").ok(t).json(t, &doc)
		if doc.Tenant != "org-1" || doc.Key != "same-key" || len(doc.Records) != 2 {
			t.Fatalf("inspect -json: %+v", doc)
		}
		for _, r := range doc.Records {
			want := created
			if r.Entity == "IdempotencyRecord" {
				want = approved
			}
			if r.State != "succeeded" || r.Attempt != 1 || r.Tenant != "org-1" || r.ClaimedAt == nil || r.CompletedAt == nil ||
				compact(t, r.Data) != compact(t, field(t, want)) || len(r.Errors) != 0 {
				t.Fatalf("record %+v", r)
			}
		}

		// Past retention, before and after the sweep.
		be.Clock.Advance(idem.DefaultRetention + time.Hour)
		if text := be.run("inspect", "-tenant", "org-1", "-key", "same-key").ok(t).stdout; strings.Count(text, "IDEMPOTENCY_KEY_EXPIRED (past retention") != 2 {
			t.Fatalf("expired records, not yet swept:\n%s", text)
		}
		be.run("sweep").ok(t)
		doc = inspected{}
		be.run("-json", "inspect", "-tenant", "org-1", "-key", "same-key").ok(t).json(t, &doc)
		states := map[string]int{}
		for _, r := range doc.Records {
			states[r.State]++
			switch r.State {
			case "tombstone":
				if len(r.Data) != 0 || r.ArchivedAt == nil || !strings.HasPrefix(r.Retry, "IDEMPOTENCY_KEY_EXPIRED; the mutation never runs again") {
					t.Fatalf("tombstone %+v", r)
				}
			case "archived":
				want := created
				if r.Entity == "IdempotencyRecord" {
					want = approved
				}
				if compact(t, r.Data) != compact(t, field(t, want)) || r.ArchivedAt == nil || r.Attempt != 1 {
					t.Fatalf("archived %+v", r)
				}
			}
		}
		if states["tombstone"] != 2 || states["archived"] != 2 || len(doc.Records) != 4 {
			t.Fatalf("after the sweep: %+v", doc)
		}
		text = be.run("inspect", "-tenant", "org-1", "-key", "same-key").ok(t).stdout
		for _, want := range []string{"Shipment (archive idempotency_archives, from shipments): archived", "(in the archive)", "history, never replayed"} {
			if !strings.Contains(text, want) {
				t.Fatalf("inspect after the sweep lacks %q:\n%s", want, text)
			}
		}

		// Unknown keys and tenants: said, exit 1; JSON still one document.
		be.run("inspect", "-tenant", "org-3", "-key", "same-key").fails(t, idemctl.ExitFailure,
			`^idemctl inspect: no record of key "same-key" for tenant "org-3" in idempotency_records, shipments or the archive \(idempotency_archives\)\n$`)
		r := be.run("-json", "inspect", "-tenant", "org-1", "-key", "unknown")
		r.fails(t, idemctl.ExitFailure, `no record of key "unknown"`)
		doc = inspected{}
		r.json(t, &doc)
		if len(doc.Records) != 0 || !strings.Contains(r.stdout, `"records": []`) {
			t.Fatalf("not found, JSON: %s", r.stdout)
		}
	})
}

// stuck lists pending claims whose lease ran out long ago: a worker died
// (here: released its claim) and no retry came.
func TestStuck(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		be := newBench(t, b)
		be.Resolver.Hook = func(ctx context.Context, _ *ent.Shipment) error {
			if strings.HasPrefix(keyOf(ctx), "stuck") {
				return errors.New("connection reset") // retryable: the claim stays pending
			}
			return nil
		}
		be.ship("org-1", "fine")
		for _, k := range []string{"stuck-1", "stuck-2"} {
			if r := be.Post("org-1", k, 100); len(r.Errors) == 0 {
				t.Fatalf("%s: %s", k, r.Body)
			}
			be.Clock.Advance(time.Second)
		}
		if text := be.run("stuck").ok(t).stdout; text != "No stuck claims: no pending record's lease ran out more than 1m30s ago.\n" {
			t.Fatalf("fresh claims are not stuck:\n%s", text)
		}
		be.Clock.Advance(2 * time.Minute)
		text := be.run("stuck").ok(t).stdout
		if !strings.HasPrefix(text, "2 pending claims whose lease ran out more than 1m30s ago (at most 50 per table):") ||
			!regexp.MustCompile(`(?m)^Shipment +org-1 +"stuck-1" +Mutation.createShipment +1 +\S+Z +\S+Z \(2m\ds ago\) +the recoverer$`).MatchString(text) ||
			strings.Index(text, `"stuck-1"`) > strings.Index(text, `"stuck-2"`) {
			t.Fatalf("stuck:\n%s", text)
		}
		var doc struct {
			OlderThan string               `json:"olderThan"`
			Limit     int                  `json:"limitPerTable"`
			Records   []idemctl.RecordInfo `json:"records"`
			Truncated []string             `json:"truncated"`
		}
		be.run("-json", "stuck", "-limit", "1").ok(t).json(t, &doc)
		if doc.OlderThan != "1m30s" || doc.Limit != 1 || len(doc.Records) != 1 || doc.Records[0].Key != "stuck-1" ||
			len(doc.Truncated) != 1 || doc.Truncated[0] != "shipments" ||
			doc.Records[0].State != "pending" || doc.Records[0].LeaseExpiresAt == nil || doc.Records[0].Entity != "Shipment" ||
			!doc.Records[0].Recoverable {
			t.Fatalf("stuck -json: %+v", doc)
		}
		if text := be.run("stuck", "-limit", "1").ok(t).stdout; !strings.Contains(text, "Truncated: shipments has more than 1; see the rest with a larger -limit (-limit 10).") {
			t.Fatalf("stuck -limit 1 does not say it is truncated:\n%s", text)
		}
		// -older and -lease move the threshold.
		if text := be.run("stuck", "-older", "1h").ok(t).stdout; !strings.HasPrefix(text, "No stuck claims") {
			t.Fatalf("-older 1h:\n%s", text)
		}
		if text := be.run("-lease", "1h", "stuck").ok(t).stdout; !strings.Contains(text, "more than 3h ago") {
			t.Fatalf("-lease 1h:\n%s", text)
		}
		// inspect says what a retry does, and a retry does it.
		if text := be.run("inspect", "-tenant", "org-1", "-key", "stuck-1").ok(t).stdout; !strings.Contains(text, "takes the claim over and runs the mutation again (attempt 2)") {
			t.Fatalf("inspect a stuck claim:\n%s", text)
		}
		be.Resolver.Hook = nil
		be.ship("org-1", "stuck-1")
		if text := be.run("stuck").ok(t).stdout; !strings.HasPrefix(text, "1 pending claim whose") || strings.Contains(text, `"stuck-1"`) {
			t.Fatalf("after a retry:\n%s", text)
		}
	})
}

// failed lists the records that hold a final error.
func TestFailed(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		be := newBench(t, b)
		be.Resolver.Hook = func(ctx context.Context, _ *ent.Shipment) error {
			if keyOf(ctx) == "no-stock" {
				return idem.Final(&gqlerror.Error{Message: "out of stock", Extensions: map[string]any{"code": "OUT_OF_STOCK"}})
			}
			return nil
		}
		if text := be.run("failed").ok(t).stdout; text != "No failed records.\n" {
			t.Fatalf("no failures:\n%s", text)
		}
		be.ship("org-1", "fine")
		if r := be.Post("org-1", "no-stock", 100); r.Code() != "OUT_OF_STOCK" {
			t.Fatalf("final error: %s", r.Body)
		}
		be.Clock.Advance(time.Second)
		if r := be.GQL("org-2", `mutation { approveShipment(idempotencyKey: "approve-1", id: "00000000-0000-0000-0000-000000000000") { id } }`, nil); len(r.Errors) == 0 {
			t.Fatalf("approve a missing shipment: %s", r.Body)
		}
		text := be.run("failed").ok(t).stdout
		if !strings.HasPrefix(text, "2 failed records (at most 50 per table, newest first):") ||
			!regexp.MustCompile(`(?m)^Shipment +org-1 +"no-stock" +Mutation.createShipment +1 +\S+Z \(\S+ ago\) +out of stock \[OUT_OF_STOCK\]$`).MatchString(text) ||
			!regexp.MustCompile(`(?m)^IdempotencyRecord +org-2 +"approve-1" +Mutation.approveShipment .* shipment not found \[MUTATION_FAILED\]$`).MatchString(text) {
			t.Fatalf("failed:\n%s", text)
		}
		var doc struct {
			Limit    int                  `json:"limitPerTable"`
			Records  []idemctl.RecordInfo `json:"records"`
			Complete bool                 `json:"complete"`
		}
		be.run("-json", "failed", "-limit", "5").ok(t).json(t, &doc)
		if doc.Limit != 5 || len(doc.Records) != 2 {
			t.Fatalf("failed -json: %+v", doc)
		}
		for _, r := range doc.Records {
			if r.State != "failed" || len(r.Errors) != 1 || string(r.Data) != "null" {
				t.Fatalf("failed record %+v", r)
			}
		}

		// Filtered by tenant, code and time.
		be.Clock.Advance(time.Hour)
		if r := be.Post("org-3", "no-stock", 100); r.Code() != "OUT_OF_STOCK" {
			t.Fatalf("final error: %s", r.Body)
		}
		for _, c := range []struct {
			args []string
			want []string // tenant/key, newest first
		}{
			{[]string{"-tenant", "org-2"}, []string{"org-2/approve-1"}},
			{[]string{"-code", "OUT_OF_STOCK"}, []string{"org-3/no-stock", "org-1/no-stock"}},
			{[]string{"-code", "MUTATION_FAILED"}, []string{"org-2/approve-1"}},
			{[]string{"-code", "OUT_OF_STOCK", "-tenant", "org-2"}, nil},
			{[]string{"-since", "30m"}, []string{"org-3/no-stock"}},
			{[]string{"-until", "30m"}, []string{"org-2/approve-1", "org-1/no-stock"}}, // table by table
			{[]string{"-since", "2h", "-until", "30m", "-code", "OUT_OF_STOCK"}, []string{"org-1/no-stock"}},
		} {
			var doc struct {
				Limit        int                  `json:"limitPerTable"`
				Records      []idemctl.RecordInfo `json:"records"`
				Complete     bool                 `json:"complete"`
				Tenant, Code string
				Since, Until string
			}
			be.run(append([]string{"-json", "failed"}, c.args...)...).ok(t).json(t, &doc)
			var got []string
			for _, r := range doc.Records {
				got = append(got, r.Tenant+"/"+r.Key)
			}
			if fmt.Sprint(got) != fmt.Sprint(c.want) || !doc.Complete {
				t.Fatalf("failed %v: %v (complete %v), want %v", c.args, got, doc.Complete, c.want)
			}
		}
		if text := be.run("failed", "-tenant", "org-2", "-code", "MUTATION_FAILED", "-since", "2h").ok(t).stdout; !strings.HasPrefix(text,
			`1 failed record of tenant "org-2" with code MUTATION_FAILED completed in the last 2h`) {
			t.Fatalf("failed with filters:\n%s", text)
		}
		if text := be.run("failed", "-code", "NOPE").ok(t).stdout; text != "No failed records with code NOPE.\n" {
			t.Fatalf("failed -code NOPE:\n%s", text)
		}
		if r := be.run("failed", "-since", "1h", "-until", "2h"); r.code != 2 || !strings.Contains(r.stderr, "-until (2h0m0s) must be shorter than -since (1h0m0s)") {
			t.Fatalf("-until past -since:\n%s", r)
		}
		opts := idemctl.FailedOptions{Tenant: "org-1", Code: "OUT_OF_STOCK"}
		if infos, complete, err := idemctl.New(be.Hook).Failed(context.Background(), opts); err != nil || !complete || len(infos) != 1 || infos[0].Key != "no-stock" {
			t.Fatalf("Admin.Failed(%+v): %+v %v %v", opts, infos, complete, err)
		}

		// A listing cut short by -limit says so, and how to see the rest.
		if r := be.Post("org-1", "no-stock-2", 100); r.Code() != "" {
			t.Fatalf("second shipment: %s", r.Body)
		}
		be.Resolver.Hook = func(context.Context, *ent.Shipment) error {
			return idem.Final(&gqlerror.Error{Message: "out of stock", Extensions: map[string]any{"code": "OUT_OF_STOCK"}})
		}
		be.Post("org-1", "no-stock-3", 100)
		text = be.run("failed", "-limit", "1").ok(t).stdout
		if !strings.Contains(text, "Truncated: shipments has more than 1; see the rest with a larger -limit (-limit 10).") ||
			strings.Contains(text, "idempotency_records has") {
			t.Fatalf("failed -limit 1 does not say it is truncated:\n%s", text)
		}
		var cut struct {
			Limit     int                  `json:"limitPerTable"`
			Records   []idemctl.RecordInfo `json:"records"`
			Truncated []string             `json:"truncated"`
			Complete  bool                 `json:"complete"`
		}
		be.run("-json", "failed", "-limit", "1").ok(t).json(t, &cut)
		if len(cut.Records) != 2 || len(cut.Truncated) != 1 || cut.Truncated[0] != "shipments" {
			t.Fatalf("failed -json -limit 1: %+v", cut)
		}
		if text := be.run("failed", "-limit", "3").ok(t).stdout; strings.Contains(text, "Truncated") {
			t.Fatalf("failed -limit 3 says it is truncated:\n%s", text)
		}
	})
}

type statsDoc struct {
	Tables []struct {
		Entity, Table                          string
		Pending, Succeeded, Failed, Tombstones int64
		OldestPending                          *time.Time
	}
	ArchivedRecords, ArchiveBytes int64
	Replication                   *idemctl.Replication
}

func (s statsDoc) of(entity string) (pending, succeeded, failed, tombstones int64) {
	for _, t := range s.Tables {
		if t.Entity == entity {
			return t.Pending, t.Succeeded, t.Failed, t.Tombstones
		}
	}
	return -1, -1, -1, -1
}

// stats counts records by state per entity, finds the oldest pending
// claim, and measures the archive.
func TestStats(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		be := newBench(t, b)
		be.Resolver.Hook = func(ctx context.Context, _ *ent.Shipment) error {
			switch keyOf(ctx) {
			case "pending":
				return errors.New("connection reset")
			case "failed":
				return idem.Final(errors.New("no"))
			}
			return nil
		}
		for _, k := range []string{"a", "b", "c", "pending", "failed"} {
			be.Post("org-1", k, 100)
		}
		be.Clock.Advance(idem.DefaultRetention + time.Hour)
		be.run("sweep").ok(t) // a, b, c and failed archived; pending stays
		be.ship("org-1", "d")

		var doc statsDoc
		be.run("-json", "stats").ok(t).json(t, &doc)
		if p, s, f, ts := doc.of("Shipment"); p != 1 || s != 1 || f != 0 || ts != 4 {
			t.Fatalf("Shipment: pending %d succeeded %d failed %d tombstones %d", p, s, f, ts)
		}
		if p, s, f, ts := doc.of("IdempotencyRecord"); p+s+f+ts != 0 {
			t.Fatalf("IdempotencyRecord: %+v", doc)
		}
		if doc.ArchivedRecords != 4 || doc.ArchiveBytes < 200 || doc.Tables[1].OldestPending == nil {
			t.Fatalf("stats: %+v", doc)
		}
		text := be.run("stats").ok(t).stdout
		for _, re := range []string{
			`(?m)^ENTITY +TABLE +PENDING +SUCCEEDED +FAILED +TOMBSTONES +OLDEST PENDING$`,
			`(?m)^Shipment +shipments +1 +1 +0 +4 +\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \(25h ago\)$`,
			`(?m)^IdempotencyRecord +idempotency_records +0 +0 +0 +0 +-$`,
			`(?m)^Archive \(idempotency_archives\): 4 records, \d+ B of responses\.$`,
		} {
			if !regexp.MustCompile(re).MatchString(text) {
				t.Fatalf("stats does not match %s:\n%s", re, text)
			}
		}
	})
}

type sweepDoc struct {
	DryRun           bool                 `json:"dryRun"`
	Tables           []idemctl.TableSweep `json:"tables"`
	Archived         int                  `json:"archived"`
	Purged           int                  `json:"purged"`
	Elapsed          string               `json:"elapsed"`
	ElapsedSeconds   float64              `json:"elapsedSeconds"`
	RecordsPerSecond float64              `json:"recordsPerSecond"`
	Complete         bool                 `json:"complete"`
}

// sweep archives, purges, counts in a dry run, and shows its progress on
// stderr when it runs long.
func TestSweep(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		be := newBench(t, b)
		for _, k := range []string{"a", "b", "c", "d", "e"} {
			be.ship("org-1", k)
		}
		var doc sweepDoc
		be.run("-json", "sweep", "-dry-run").ok(t).json(t, &doc)
		if !doc.DryRun || doc.Archived != 0 || doc.Purged != 0 || len(doc.Tables) != 2 || !doc.Complete {
			t.Fatalf("dry run inside retention: %+v", doc)
		}
		be.Clock.Advance(idem.DefaultRetention + time.Minute)
		be.run("-json", "sweep", "-dry-run").ok(t).json(t, &doc)
		if !doc.DryRun || doc.Archived != 5 || doc.Purged != 0 {
			t.Fatalf("dry run past retention: %+v", doc)
		}
		text := be.run("sweep", "-dry-run").ok(t).stdout
		if !strings.HasPrefix(text, "Dry run: nothing changed.") ||
			!regexp.MustCompile(`(?m)^Shipment +shipments +5 +0$`).MatchString(text) ||
			!strings.Contains(text, "A sweep would archive 5 responses and purge 0 tombstones (retention 24h, horizon 30d).") {
			t.Fatalf("dry run text:\n%s", text)
		}
		// A retention flag longer than the records' age: nothing to do.
		if text := be.run("-retention", "48h", "sweep", "-dry-run").ok(t).stdout; !strings.Contains(text, "archive 0 responses") {
			t.Fatalf("-retention 48h:\n%s", text)
		}

		// A slow sweep (one record a batch, a pause between batches) reports
		// its progress on stderr, and its summary on stdout.
		r := be.run("sweep", "-batch", "1", "-pause", "400ms")
		if r.code != idemctl.ExitOK || !regexp.MustCompile(`(?m)^idemctl sweep: [1-5] archived, 0 purged so far \(now Shipment\), [\d.]+ records/s, [\d.]+s$`).MatchString(r.stderr) ||
			!strings.HasSuffix(r.stderr, "idemctl sweep: done\n") {
			t.Fatalf("progress:\n%s", r)
		}
		if !regexp.MustCompile(`(?m)^Shipment +shipments +5 +0$`).MatchString(r.stdout) ||
			!regexp.MustCompile(`(?m)^5 responses archived, 0 tombstones purged in [\d.]+s \(\d+ records/s\) \(retention 24h, horizon 30d\)\.$`).MatchString(r.stdout) {
			t.Fatalf("summary:\n%s", r)
		}
		doc = sweepDoc{}
		be.run("-json", "sweep").ok(t).json(t, &doc)
		if doc.DryRun || doc.Archived != 0 || !doc.Complete {
			t.Fatalf("a second sweep: %+v", doc)
		}
		if r := be.run("inspect", "-tenant", "org-1", "-key", "a").ok(t); !strings.Contains(r.stdout, "tombstone") {
			t.Fatalf("inspect after the sweep:\n%s", r)
		}
		if r := be.Post("org-1", "a", 100); r.Code() != string(idemcode.KeyExpired) {
			t.Fatalf("a swept key: %s", r.Body)
		}

		// Past the horizon the tombstones go, the archive stays, and the
		// key runs again as a new intent.
		be.Clock.Advance(idem.DefaultTombstoneHorizon)
		doc = sweepDoc{}
		be.run("-json", "sweep", "-batch", "2").ok(t).json(t, &doc)
		if doc.Archived != 0 || doc.Purged != 5 || doc.Tables[1].Entity != "Shipment" || doc.Tables[1].Purged != 5 || !doc.Complete {
			t.Fatalf("purge: %+v", doc)
		}
		var st statsDoc
		be.run("-json", "stats").ok(t).json(t, &st)
		if _, s, _, ts := st.of("Shipment"); s != 0 || ts != 0 || st.ArchivedRecords != 5 {
			t.Fatalf("after the purge: %+v", st)
		}
		if r := be.run("-json", "inspect", "-tenant", "org-1", "-key", "a").ok(t); strings.Count(r.stdout, `"state": "archived"`) != 1 {
			t.Fatalf("the archive is kept:\n%s", r)
		}
		if r := be.Post("org-1", "a", 100); len(r.Errors) > 0 {
			t.Fatalf("a forgotten key runs as new: %s", r.Body)
		}
	})
}

// An interrupted sweep says what it did and that nothing is lost, and
// exits 1; the next sweep finishes the work.
func TestSweepInterrupted(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		be := newBench(t, b)
		for _, k := range []string{"a", "b", "c", "d"} {
			be.ship("org-1", k)
		}
		be.Clock.Advance(idem.DefaultRetention + time.Minute)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		// ^C as soon as the first batch's archive row is seen: often while
		// the answer to its COMMIT is still on its way to the sweeper,
		// which finishes the batch and counts it (the next sweep's count
		// below says whether it did), or else in the pause of a minute
		// after it, which no busy machine's poll outlasts.
		// A fixed delay from the start would land anywhere on a loaded
		// machine, before the first batch even.
		go func() {
			for deadline := time.Now().Add(testkit.WaitBound); time.Now().Before(deadline) && ctx.Err() == nil; time.Sleep(time.Millisecond) {
				var n int
				if err := be.DB.Driver.DB().QueryRowContext(ctx, `SELECT count(*) FROM idempotency_archives`).Scan(&n); err == nil && n > 0 {
					break
				}
			}
			cancel()
		}()
		var out, errb bytes.Buffer
		cmd := idemctl.Command{Config: be.cliConfig()}
		code := cmd.Run(ctx, []string{"-json", "sweep", "-batch", "1", "-pause", "1m"}, &out, &errb)
		r := cli{code, out.String(), errb.String()}
		r.fails(t, idemctl.ExitFailure, `^idemctl sweep: interrupted after archiving [12] and purging 0 records; nothing is lost or half-moved: run sweep again to continue\n$`)
		var doc sweepDoc
		r.json(t, &doc)
		if doc.Complete || doc.Archived < 1 || doc.Archived > 2 {
			t.Fatalf("interrupted: %+v", doc)
		}
		first := doc.Archived
		doc = sweepDoc{}
		be.run("-json", "sweep").ok(t).json(t, &doc)
		if doc.Archived != 4-first || !doc.Complete {
			t.Fatalf("the next sweep: %+v", doc)
		}
		var st statsDoc
		be.run("-json", "stats").ok(t).json(t, &st)
		if _, s, _, ts := st.of("Shipment"); s != 0 || ts != 4 || st.ArchivedRecords != 4 {
			t.Fatalf("after both sweeps: %+v", st)
		}
	})
}

// Bad input: a clear line on stderr, nothing done, exit 2 for the command
// line and 1 for what happened at run time.
func TestBadInput(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		be := newBench(t, b)
		be.ship("org-1", "k")
		for _, c := range []struct {
			args    []string
			code    int
			pattern string
		}{
			{nil, 2, `^idemctl: no command given: one of inspect, stuck, failed, recovered, stats, outbox, sweep \(see idemctl -h\)`},
			{[]string{"frobnicate"}, 2, `^idemctl: unknown command "frobnicate": one of inspect, stuck, failed, recovered, stats, outbox, sweep`},
			{[]string{"-frob", "stats"}, 2, `^idemctl: flag provided but not defined: -frob \(see idemctl -h\)`},
			{[]string{"inspect"}, 2, `^idemctl inspect: -tenant is required \(see idemctl inspect -h\)`},
			{[]string{"inspect", "-tenant", "org-1"}, 2, `^idemctl inspect: -key is required`},
			{[]string{"inspect", "-key", "k"}, 2, `^idemctl inspect: -tenant is required`},
			{[]string{"inspect", "-tenant", "org-1", "-key", ""}, 2, `^idemctl inspect: malformed -key: idempotency key is empty\n$`},
			{[]string{"inspect", "-tenant", "org-1", "-key", "a\x01b"}, 2, `^idemctl inspect: malformed -key: idempotency key has a character that is not printable ASCII at byte 1\n$`},
			{[]string{"inspect", "-tenant", "org-1", "-key", strings.Repeat("x", 256)}, 2, `^idemctl inspect: malformed -key: idempotency key is 256 bytes long; the limit is 255\n$`},
			{[]string{"inspect", "-tenant", "org-1", "-key", "k", "extra"}, 2, `^idemctl inspect: unexpected argument "extra"`},
			{[]string{"inspect", "-tenant", "nobody", "-key", "k"}, 1, `^idemctl inspect: no record of key "k" for tenant "nobody"`},
			{[]string{"stuck", "-limit", "0"}, 2, `^idemctl stuck: -limit must be positive, not 0`},
			{[]string{"stuck", "-older", "soon"}, 2, `^idemctl stuck: invalid value "soon" for flag -older`},
			{[]string{"failed", "-limit", "-1"}, 2, `^idemctl failed: -limit must be positive`},
			{[]string{"recovered", "-limit", "0"}, 2, `^idemctl recovered: -limit must be positive`},
			{[]string{"recovered", "-since", "0s"}, 2, `^idemctl recovered: -since must be positive, not 0s`},
			{[]string{"recovered", "-table", "Nope"}, 1, `^idemctl recovered: idem: no record table "Nope"`},
			{[]string{"sweep", "-batch", "0"}, 2, `^idemctl sweep: -batch must be positive`},
			{[]string{"sweep", "-pause", "-1s"}, 2, `^idemctl sweep: -pause must not be negative`},
			{[]string{"stats", "-json"}, 2, `^idemctl stats: flag provided but not defined: -json \(see idemctl stats -h\)`},
			{[]string{"-retention", "40d", "stats"}, 2, `^idemctl: -horizon \(30d\) must exceed -retention \(40d\)\n$`},
			{[]string{"-lease", "0s", "stats"}, 2, `^idemctl: -lease must be positive, not 0s\n$`},
			{[]string{"-retention", "1x", "stats"}, 2, `^idemctl: invalid value "1x" for flag -retention`},
		} {
			r := be.run(c.args...)
			r.fails(t, c.code, c.pattern)
			if r.stdout != "" {
				t.Fatalf("%q wrote to stdout:\n%s", c.args, r)
			}
		}
		// -h for the program and every command: usage on stdout, exit 0.
		for _, args := range [][]string{{"-h"}, {"help"}, {"inspect", "-h"}, {"help", "sweep"}, {"stuck", "-h"}, {"failed", "-h"}, {"recovered", "-h"}, {"stats", "-h"}, {"sweep", "-h"}} {
			r := be.run(args...).ok(t)
			if !strings.HasPrefix(r.stdout, "Usage: idemctl [global flags] ") {
				t.Fatalf("%q:\n%s", args, r)
			}
		}
		if r := be.run("sweep", "-h"); !strings.Contains(r.stdout, "-dry-run") || !strings.Contains(r.stdout, "-pause duration") {
			t.Fatalf("sweep -h:\n%s", r)
		}
		// The shipment its client finished is not the recoverer's.
		if r := be.run("recovered", "-table", "Shipment").ok(t); !strings.HasPrefix(r.stdout, "No records finished by the recoverer in the last 24h.") {
			t.Fatalf("recovered:\n%s", r)
		}
		// Nothing above changed the record.
		var st statsDoc
		be.run("-json", "stats").ok(t).json(t, &st)
		if _, s, _, ts := st.of("Shipment"); s != 1 || ts != 0 {
			t.Fatalf("bad input changed something: %+v", st)
		}
	})
}

// A database that cannot be reached, or is not the application's: one
// line that names the problem, exit 1, for every command.
func TestUnreachableDatabase(t *testing.T) {
	open := func(t *testing.T, dsn string) idembackend.Backend {
		drv, err := idemdb.Open(dsn)
		if err != nil {
			t.Fatal(err)
		}
		client := ent.NewClient(ent.Driver(drv))
		t.Cleanup(func() { client.Close() })
		return client.IdempotencyBackend()
	}
	// Not migrated: the database is there, the tables are not.
	emptyPostgres := idemtest.Open(t, idemtest.Postgres)
	emptySQLite := idemtest.Open(t, idemtest.SQLite)
	for _, c := range []struct {
		name, dsn, pattern string
	}{
		{"postgres refused", "postgres://postgres@127.0.0.1:1/x?connect_timeout=5",
			"^idemctl: cannot reach the database: PostgreSQL: failed to connect to `user=postgres database=x`: 127.0.0.1:1 .*connection refused\n$"},
		{"postgres no such database", idemtest.PostgresURLOf("idemctl_no_such_database"),
			`^idemctl: cannot reach the database: PostgreSQL: .*database "idemctl_no_such_database" does not exist`},
		{"sqlite no such directory", filepath.Join(t.TempDir(), "missing", "app.db"),
			`^idemctl: cannot reach the database: SQLite: unable to open database file.*: does its directory exist, and may this user read and write it\?\n$`},
	} {
		t.Run(c.name, func(t *testing.T) {
			backend := open(t, c.dsn)
			for _, args := range [][]string{{"stats"}, {"-json", "inspect", "-tenant", "t", "-key", "k"}, {"stuck"}, {"failed"}, {"sweep"}, {"sweep", "-dry-run"}} {
				var out, errb bytes.Buffer
				hook, err := idem.New(idem.Config{Backend: backend})
				if err != nil {
					t.Fatal(err)
				}
				r := cli{idemctl.Command{Config: hook.Config()}.Run(context.Background(), args, &out, &errb), out.String(), errb.String()}
				r.fails(t, idemctl.ExitFailure, c.pattern)
				if r.stdout != "" {
					t.Fatalf("%q wrote to stdout:\n%s", args, r)
				}
			}
		})
	}
	for _, c := range []struct {
		name    string
		db      *idemtest.DB
		pattern string
	}{
		{"postgres not migrated", emptyPostgres, `^idemctl stats: PostgreSQL: relation "\w+" does not exist: is this the application's database, and has it been migrated \(start the server once\)\?\n$`},
		{"sqlite not migrated", emptySQLite, `^idemctl stats: SQLite: .*no such table: \w+.*: is this the application's database, and has it been migrated \(start the server once\)\?\n$`},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			client := ent.NewClient(ent.Driver(c.db.Driver))
			hook, err := idem.New(idem.Config{Backend: client.IdempotencyBackend()})
			if err != nil {
				t.Fatal(err)
			}
			r := cli{idemctl.Command{Config: hook.Config()}.Run(context.Background(), []string{"stats"}, &out, &errb), out.String(), errb.String()}
			r.fails(t, idemctl.ExitFailure, c.pattern)
		})
	}
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func keyOf(ctx context.Context) string {
	k, _ := idem.KeyFromContext(ctx)
	return k
}
