package testapp_test

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goovo/idem"
	"github.com/goovo/idem/idemcode"
	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/testkit/testapp"
	"github.com/goovo/idem/internal/testkit/testapp/graph"
)

// BenchmarkCreate measures one create mutation through the whole stack
// (HTTP handler, gqlgen, the hook, ent, the database) in four variants,
// interleaved in one run so that the machine's noise hits them alike:
//
//	plain   the same create with no idempotency (no hook on the field)
//	lease   idempotent, lease mode (first call of a key)
//	atomic  idempotent, atomic mode (first call of a key): its selection
//	        the row answers, so the claim is born completed, one INSERT
//	atomic-tx  the same with Config.NoOneStatementCreate: the atomic
//	        path (claim, resolver and completion in one transaction), as a
//	        create whose selection has an edge takes it
//	replay  a retry of a lease-mode key whose result is stored, sent to
//	        the process that stored it: it remembers the key finished and
//	        looks it up (one round trip)
//	replay-atomic  the same of an atomic-mode key
//	replay-elsewhere, replay-atomic-elsewhere  a retry of a key that
//	        another process stored (another handler, untimed), as behind
//	        a load balancer: the first this process sees of the key, so it
//	        claims first (one round trip: the lookup travels with the claim;
//	        in atomic mode ROLLBACK follows, off the request's path)
//	handwritten  the same create made retry-safe by hand, as a team
//	        without the framework writes it (createShipmentHandwritten:
//	        key, shipment, response, each its own statement, in one
//	        transaction): the peer the framework should beat
//	retry-elsewhere, retry-atomic-elsewhere  the same retries as
//	        idemclient sends them, saying so (Idempotency-Retry): the
//	        process looks the key up first (one statement, which reads)
//	optin-atomic, optin-lease  the same create as a hand-written mutation
//	        that opts in with @idempotent (createShipmentOptIn, -Lease: its
//	        resolver creates the shipment through the request's client, its
//	        record an IdempotencyRecord row), first call of a key
//
// Which path the first call of an atomic key takes is counted by the
// database, on a database of its own (completionUpdates): the UPDATEs per
// create of atomic and optin-atomic (metrics atomic-updates/create,
// optin-atomic-updates/create), 0 for the one-statement create.
//
// On PostgreSQL each variant runs twice in each round: on pgx, where the
// hook's store pipelines (the default), and on database/sql (the sql-
// metrics), each against its own plain create.
//
// It reports the median of each, in µs, and their ratios to plain (and of
// replay to lease). ns/op is the time of one round of all variants.
func BenchmarkCreate(b *testing.B) {
	for _, backend := range idemtest.Kinds() {
		b.Run(string(backend), func(b *testing.B) {
			benches := map[string]*testapp.Bench{"": testapp.NewBench(b, backend, idem.Config{})}
			if backend.IsPostgres() {
				benches["sql-"] = testapp.NewBenchDatabaseSQL(b, backend, idem.Config{})
			}
			updates := completionUpdates(b, backend, "createShipmentAtomic", "createShipmentOptIn")
			benchCreate(b, benches)
			b.ReportMetric(updates["createShipmentAtomic"], "atomic-updates/create")
			b.ReportMetric(updates["createShipmentOptIn"], "optin-atomic-updates/create")
		})
	}
}

// createBody is the body of a create mutation of field; with a key, the key
// is a variable, as idemclient sends it: the operation's text is the same
// for every key, so that gqlgen's query cache parses and validates it once,
// as it does the plain create's. (A key written into the text makes every
// first call a new document to parse and validate: 60 µs of CPU on the
// machine of BENCHMARKS.md, charged to the idempotent variants alone.)
func createBody(field, key string) string {
	if key == "" {
		return fmt.Sprintf(`{"query":"mutation { %s(input: {destination: \"Lyon\", weightGrams: 900}) { id destination weightGrams } }"}`, field)
	}
	return fmt.Sprintf(`{"query":"mutation($k: String!) { %s(idempotencyKey: $k, input: {destination: \"Lyon\", weightGrams: 900}) { id destination weightGrams } }","variables":{"k":%q}}`, field, key)
}

// sendCreate sends a create's body to h as the bench organisation and
// fails b unless it succeeds.
func sendCreate(b *testing.B, h http.Handler, body string) { sendAttempt(b, h, body, 1) }

// sendAttempt is sendCreate for the given attempt of a client's call:
// from the second on, the request says it is a retry, as idemclient's do.
func sendAttempt(b *testing.B, h http.Handler, body string, attempt int) {
	req := httptest.NewRequest(http.MethodPost, "/query", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Org", "bench")
	if attempt > 1 {
		req.Header.Set(idemcode.HeaderRetry, strconv.Itoa(attempt-1))
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK || strings.Contains(rec.Body.String(), `"errors"`) {
		b.Fatalf("%s -> %s", body, rec.Body.String())
	}
}

// benchCreate interleaves the variants on each bench, whose name prefixes
// its metrics.
func benchCreate(b *testing.B, benches map[string]*testapp.Bench) {
	send := func(h http.Handler, body string) { sendCreate(b, h, body) }
	mutation := createBody
	names := slices.Sorted(maps.Keys(benches))
	variants := []string{"plain", "lease", "atomic", "atomic-tx", "handwritten", "replay", "replay-atomic", "replay-elsewhere", "replay-atomic-elsewhere", "retry-elsewhere", "retry-atomic-elsewhere", "optin-atomic", "optin-lease"}
	elsewhere, txOnly := map[string]http.Handler{}, map[string]http.Handler{}
	samples := map[string][]time.Duration{}
	for _, name := range names {
		send(benches[name].Server.Config.Handler, mutation("createShipmentLease", "replayed-key"))
		send(benches[name].Server.Config.Handler, mutation("createShipmentAtomic", "replayed-atomic-key"))
		be := benches[name]
		if err := graph.CreateHandwrittenTable(context.Background(), be.Client); err != nil {
			b.Fatal(err)
		}
		elsewhere[name] = be.Handler(be.Client, be.Resolver, idem.Config{})
		txOnly[name] = be.Handler(be.Client, be.Resolver, idem.Config{NoOneStatementCreate: true})
	}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		for _, v := range variants {
			for _, name := range names {
				var body string
				attempt := 1
				switch v {
				case "plain":
					body = mutation("createShipmentPlain", "")
				case "lease":
					body = mutation("createShipmentLease", fmt.Sprintf("lease-%d", i))
				case "atomic":
					body = mutation("createShipmentAtomic", fmt.Sprintf("atomic-%d", i))
				case "optin-atomic":
					body = mutation("createShipmentOptIn", fmt.Sprintf("optin-atomic-%d", i))
				case "optin-lease":
					body = mutation("createShipmentOptInLease", fmt.Sprintf("optin-lease-%d", i))
				case "handwritten":
					body = mutation("createShipmentHandwritten", fmt.Sprintf("handwritten-%d", i))
				case "replay":
					body = mutation("createShipmentLease", "replayed-key")
				case "replay-atomic":
					body = mutation("createShipmentAtomic", "replayed-atomic-key")
				case "replay-elsewhere":
					body = mutation("createShipmentLease", fmt.Sprintf("elsewhere-%d", i))
					send(elsewhere[name], body)
				case "replay-atomic-elsewhere":
					body = mutation("createShipmentAtomic", fmt.Sprintf("atomic-elsewhere-%d", i))
					send(elsewhere[name], body)
				case "retry-elsewhere":
					body, attempt = mutation("createShipmentLease", fmt.Sprintf("retry-elsewhere-%d", i)), 2
					send(elsewhere[name], body)
				case "retry-atomic-elsewhere":
					body, attempt = mutation("createShipmentAtomic", fmt.Sprintf("retry-atomic-elsewhere-%d", i)), 2
					send(elsewhere[name], body)
				}
				h := benches[name].Server.Config.Handler
				if v == "atomic-tx" {
					body, h = mutation("createShipmentAtomic", fmt.Sprintf("atomic-tx-%d", i)), txOnly[name]
				}
				start := time.Now()
				sendAttempt(b, h, body, attempt)
				samples[name+v] = append(samples[name+v], time.Since(start))
			}
		}
	}
	b.StopTimer()
	for _, name := range names {
		reportCreate(b, name, variants, samples)
	}
}

// reportCreate reports the medians of the variants of the bench name
// prefixes (samples by name+variant), in µs, and their ratios to plain.
func reportCreate(b *testing.B, name string, variants []string, samples map[string][]time.Duration) {
	p50 := map[string]float64{}
	for _, v := range variants {
		s := samples[name+v]
		slices.Sort(s)
		p50[v] = float64(s[len(s)/2].Microseconds())
		b.ReportMetric(p50[v], name+v+"-p50-µs")
	}
	b.ReportMetric(p50["lease"]/p50["plain"], name+"lease/plain")
	b.ReportMetric(p50["atomic"]/p50["plain"], name+"atomic/plain")
	b.ReportMetric(p50["atomic-tx"]/p50["plain"], name+"atomic-tx/plain")
	b.ReportMetric(p50["handwritten"]/p50["plain"], name+"handwritten/plain")
	b.ReportMetric(p50["replay"]/p50["plain"], name+"replay/plain")
	b.ReportMetric(p50["replay-atomic"]/p50["plain"], name+"replay-atomic/plain")
	b.ReportMetric(p50["replay-elsewhere"]/p50["plain"], name+"replay-elsewhere/plain")
	b.ReportMetric(p50["replay-atomic-elsewhere"]/p50["plain"], name+"replay-atomic-elsewhere/plain")
	b.ReportMetric(p50["retry-elsewhere"]/p50["plain"], name+"retry-elsewhere/plain")
	b.ReportMetric(p50["retry-atomic-elsewhere"]/p50["plain"], name+"retry-atomic-elsewhere/plain")
	b.ReportMetric(p50["optin-atomic"]/p50["plain"], name+"optin-atomic/plain")
	b.ReportMetric(p50["optin-lease"]/p50["plain"], name+"optin-lease/plain")
	b.ReportMetric(p50["replay"]/p50["lease"], name+"replay/first")
}
