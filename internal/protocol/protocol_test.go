package protocol

import (
	"bufio"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/goovo/idem/idemcode"
	"github.com/goovo/idem/internal/fingerprint"
	"github.com/goovo/idem/internal/record"
)

// The decision table, a case for each row of docs/protocol.md's "The
// decision table", under the row's name. No database, no HTTP, no
// application: the record as read, the request, the time.
var (
	now       = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	retention = 24 * time.Hour
	fp        = fingerprint.Fingerprint{Field: "Mutation.createOrder", Arguments: "a1", Selection: "s1"}.String()
	otherArgs = fingerprint.Fingerprint{Field: "Mutation.createOrder", Arguments: "a2", Selection: "s1"}.String()
	// alice's and bob's requests, the same but for who sent them.
	alice = fingerprint.Fingerprint{Field: "Mutation.createOrder", Arguments: "a1", Selection: "s1", Owner: fingerprint.OwnerOf("alice")}.String()
	bob   = fingerprint.Fingerprint{Field: "Mutation.createOrder", Arguments: "a1", Selection: "s1", Owner: fingerprint.OwnerOf("bob")}.String()
)

// owned is rec as alice's request stored it.
func owned(rec *record.Record) *record.Record {
	rec.Fingerprint = alice
	return rec
}

func pending(leaseLeft time.Duration) *record.Record {
	return &record.Record{Status: record.StatusPending, Fingerprint: fp, Attempt: 1,
		ClaimedAt: now.Add(-time.Minute), LeaseExpiresAt: now.Add(leaseLeft)}
}

func finished(status string, completedAgo time.Duration) *record.Record {
	return &record.Record{Status: status, Fingerprint: fp, Attempt: 1,
		ClaimedAt: now.Add(-completedAgo - time.Second), CompletedAt: now.Add(-completedAgo)}
}

type tableCase struct {
	row  string // the row's name in docs/protocol.md
	rec  *record.Record
	req  Request
	want Decision
}

var table = []tableCase{
	{row: "unknown key", rec: nil, req: Request{Fingerprint: fp, Retention: retention},
		want: Decision{Kind: Claim}},
	{row: "claim gone after a run", rec: nil, req: Request{Fingerprint: fp, Retention: retention, Ran: true, MayWait: true},
		want: Decision{Kind: InProgress}},
	{row: "another caller's key", rec: owned(finished(record.StatusSucceeded, retention)), req: Request{Fingerprint: bob, Retention: retention},
		want: Decision{Kind: Refuse, Code: idemcode.KeyForbidden}},
	{row: "past retention", rec: finished(record.StatusSucceeded, retention), req: Request{Fingerprint: fp, Retention: retention},
		want: Decision{Kind: Refuse, Code: idemcode.KeyExpired}},
	{row: "different request", rec: finished(record.StatusSucceeded, time.Hour), req: Request{Fingerprint: otherArgs, Retention: retention},
		want: Decision{Kind: Refuse, Code: idemcode.KeyReused, Differences: []string{"arguments"}}},
	{row: "finished", rec: finished(record.StatusFailed, time.Hour), req: Request{Fingerprint: fp, Retention: retention, Ran: true},
		want: Decision{Kind: Replay}},
	{row: "live claim, may wait", rec: pending(time.Second), req: Request{Fingerprint: fp, Retention: retention, MayWait: true},
		want: Decision{Kind: Wait}},
	{row: "live claim", rec: pending(time.Second), req: Request{Fingerprint: fp, Retention: retention},
		want: Decision{Kind: InProgress}},
	{row: "expired claim, ran once", rec: pending(-time.Second), req: Request{Fingerprint: fp, Retention: retention, Ran: true},
		want: Decision{Kind: InProgress}},
	{row: "expired claim", rec: pending(0), req: Request{Fingerprint: fp, Retention: retention, MayWait: true},
		want: Decision{Kind: TakeOver}},
	{row: "foreign row", rec: &record.Record{Status: "", Fingerprint: fp}, req: Request{Fingerprint: fp, Retention: retention},
		want: Decision{Kind: Refuse, Code: idemcode.KeyReused, Foreign: true}},
}

func TestDecisionTable(t *testing.T) {
	for _, c := range table {
		t.Run(c.row, func(t *testing.T) {
			got := Decide(c.rec, c.req, now)
			if got.Kind != c.want.Kind || got.Code != c.want.Code || got.Foreign != c.want.Foreign ||
				strings.Join(got.Differences, ",") != strings.Join(c.want.Differences, ",") {
				t.Fatalf("Decide = %+v, want %+v", got, c.want)
			}
		})
	}
}

// The edges of the rows: a lease that runs out exactly now is run out
// (the takeover's statement compares lease ≤ now); a record completed
// exactly a retention window ago is past it, one archived early is past it
// whatever its completion; a pending claim is never expired, however old;
// a different request is refused before a finished record replays, and
// before a pending one is taken over or waited for.
func TestDecisionEdges(t *testing.T) {
	if d := Decide(pending(0), Request{Fingerprint: fp}, now); d.Kind != TakeOver {
		t.Errorf("lease ending now: %v, want TakeOver", d.Kind)
	}
	if d := Decide(pending(time.Nanosecond), Request{Fingerprint: fp}, now); d.Kind != InProgress {
		t.Errorf("lease ending a nanosecond from now: %v, want InProgress", d.Kind)
	}
	if d := Decide(finished(record.StatusSucceeded, retention-time.Nanosecond), Request{Fingerprint: fp, Retention: retention}, now); d.Kind != Replay {
		t.Errorf("a nanosecond within retention: %v, want Replay", d.Kind)
	}
	archived := finished(record.StatusSucceeded, time.Minute)
	archived.ArchivedAt = now
	if d := Decide(archived, Request{Fingerprint: fp, Retention: retention}, now); d.Code != idemcode.KeyExpired {
		t.Errorf("archived: %+v, want KEY_EXPIRED", d)
	}
	old := pending(-10 * retention)
	if d := Decide(old, Request{Fingerprint: fp, Retention: retention}, now); d.Kind != TakeOver {
		t.Errorf("an old pending claim: %v, want TakeOver (only finished records expire)", d.Kind)
	}
	for _, rec := range []*record.Record{finished(record.StatusSucceeded, time.Minute), pending(time.Minute), pending(-time.Minute)} {
		if d := Decide(rec, Request{Fingerprint: otherArgs, Retention: retention, MayWait: true}, now); d.Code != idemcode.KeyReused || d.Foreign {
			t.Errorf("%s record, another request: %+v, want KEY_REUSED", rec.Status, d)
		}
	}
	// An unreadable stored fingerprint differs from any request's.
	foreign := &record.Record{Status: record.StatusSucceeded, Fingerprint: "not a fingerprint", CompletedAt: now}
	if d := Decide(foreign, Request{Fingerprint: fp, Retention: retention}, now); d.Code != idemcode.KeyReused || len(d.Differences) == 0 {
		t.Errorf("unreadable fingerprint: %+v, want KEY_REUSED with a difference", d)
	}
}

// docRow is a row of docs/protocol.md's decision table.
type docRow struct{ name, decision, model string }

// decisionRows reads the decision table of docs/protocol.md.
func decisionRows(t *testing.T) []docRow {
	t.Helper()
	f, err := os.Open("../../docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []docRow
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := sc.Text()
		switch {
		case l == "## The decision table":
			in = true
		case in && strings.HasPrefix(l, "## "):
			return rows
		case in && strings.HasPrefix(l, "| ") && !strings.HasPrefix(l, "| row ") && !strings.HasPrefix(l, "|---"):
			cells := strings.Split(strings.ReplaceAll(l, `\|`, "\x00"), "|")
			if len(cells) != 7 {
				t.Fatalf("docs/protocol.md: a row of the decision table with %d cells: %s", len(cells)-2, l)
			}
			cell := func(i int) string { return strings.ReplaceAll(strings.TrimSpace(cells[i]), "\x00", "|") }
			rows = append(rows, docRow{name: cell(1), decision: cell(4), model: strings.Trim(cell(5), "`")})
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return rows
}

// The doc's table and the code's agree: every row of docs/protocol.md has
// a case here, in the same order, with the decision the doc names (its kind
// and, for a refusal, its code), and every case is a row of the doc. Every
// model branch the doc names is a guard of model/idempotency.pml's lookup.
func TestDocumentedTableIsTheCodes(t *testing.T) {
	rows := decisionRows(t)
	if len(rows) != len(table) {
		t.Fatalf("docs/protocol.md's decision table has %d rows, this test %d cases", len(rows), len(table))
	}
	model, err := os.ReadFile("../../model/idempotency.pml")
	if err != nil {
		t.Fatal(err)
	}
	for i, row := range rows {
		c := table[i]
		if row.name != c.row {
			t.Errorf("row %d: the doc's is %q, the test's %q", i+1, row.name, c.row)
			continue
		}
		want := c.want.Kind.String()
		if c.want.Code != "" {
			want += " " + string(c.want.Code)
		}
		if row.decision != want {
			t.Errorf("row %q: the doc says %q, the code decides %q", row.name, row.decision, want)
		}
		if row.model != "not modelled" && !strings.Contains(string(model), ":: "+row.model+" ->") {
			t.Errorf("row %q: the model has no branch %q", row.name, row.model)
		}
	}
}

// A finished record's expiry is the one its answer promised when that is
// later than its completion plus this process's retention: a process
// started with a shorter retention replays it until then.
func TestPromisedExpiryOutlivesAShorterRetention(t *testing.T) {
	done := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rec := &record.Record{Status: record.StatusSucceeded, CompletedAt: done, LeaseExpiresAt: done.Add(24 * time.Hour)}
	if Expired(rec, 10*time.Second, done.Add(time.Hour)) {
		t.Fatal("expired an hour after an answer promised for 24h, with a retention of 10s")
	}
	if !Expired(rec, 10*time.Second, done.Add(24*time.Hour)) {
		t.Fatal("not expired once the promise ended")
	}
	// A record finished before expiries were stored: its lease ended
	// before its retention, which rules.
	old := &record.Record{Status: record.StatusSucceeded, CompletedAt: done, LeaseExpiresAt: done.Add(30 * time.Second)}
	if got := ExpiresAt(old, time.Hour); !got.Equal(done.Add(time.Hour)) {
		t.Fatalf("ExpiresAt of an old record: %v", got)
	}
}

// Another caller's key is refused whatever the record's state and whatever
// the request asks (the same arguments or others), so that the answer
// tells nothing of the first request; the same caller, and a record stored
// before the application said who its callers are, are not.
func TestAnotherCallersKey(t *testing.T) {
	bobOther := fingerprint.Fingerprint{Field: "Mutation.createOrder", Arguments: "a2", Selection: "s1", Owner: fingerprint.OwnerOf("bob")}.String()
	for _, rec := range []*record.Record{owned(finished(record.StatusSucceeded, time.Hour)), owned(finished(record.StatusFailed, retention)),
		owned(pending(time.Second)), owned(pending(-time.Second)), owned(&record.Record{Fingerprint: alice})} {
		for _, req := range []string{bob, bobOther} {
			if d := Decide(rec, Request{Fingerprint: req, Retention: retention}, now); d.Kind != Refuse || d.Code != idemcode.KeyForbidden || d.Differences != nil {
				t.Errorf("%s record, bob's request: %+v", rec.Status, d)
			}
		}
	}
	if d := Decide(owned(finished(record.StatusSucceeded, time.Hour)), Request{Fingerprint: alice, Retention: retention}, now); d.Kind != Replay {
		t.Errorf("alice's own retry: %+v", d)
	}
	if d := Decide(finished(record.StatusSucceeded, time.Hour), Request{Fingerprint: bob, Retention: retention}, now); d.Kind != Replay {
		t.Errorf("a record stored before callers were known, bob's retry: %+v", d)
	}
}
