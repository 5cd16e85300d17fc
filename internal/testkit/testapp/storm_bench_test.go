package testapp_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/goovo/idem"
	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/testkit/testapp"
)

// stormSize is how many requests with one key arrive at once.
const stormSize = 256

// BenchmarkStorm measures a storm of duplicates on PostgreSQL: 256
// concurrent requests with one key (a client library retrying in a loop, a
// load balancer replaying, a user clicking), timed until all 256 have their
// final answer, against one request alone. Each round also times 256
// concurrent requests with 256 different keys of the plain, non-idempotent
// create: what the machine needs for 256 mutations at once, whatever their
// keys.
//
//	atomic      createShipmentAtomic: duplicates wait on the unique index for the first
//	            to commit, then replay
//	lease-wait  createShipmentLease with WaitForInFlight: duplicates find the claim
//	            pending, poll until it completes, then replay
//
// Every measurement starts from a quiet machine (after a GC and a pause).
// It reports the medians (storm and plain256 in ms, single in µs: the
// median of five sequential requests per round) and the ratios
// storm/single and storm/plain256. ns/op is the time of one round.
func BenchmarkStorm(b *testing.B) {
	for _, m := range []struct {
		name  string
		field string
		cfg   idem.Config
	}{
		{"atomic", "createShipmentAtomic", idem.Config{}},
		{"lease-wait", "createShipmentLease", idem.Config{WaitForInFlight: 10 * time.Second}},
	} {
		b.Run(m.name, func(b *testing.B) {
			benchStorm(b, testapp.NewBench(b, idemtest.Postgres, m.cfg), m.field)
		})
		// The same on database/sql, right after: the path before the
		// pipelined store.
		b.Run(m.name+"-database-sql", func(b *testing.B) {
			benchStorm(b, testapp.NewBenchDatabaseSQL(b, idemtest.Postgres, m.cfg), m.field)
		})
	}
}

func benchStorm(b *testing.B, be *testapp.Bench, field string) {
	h := be.Server.Config.Handler
	body := func(field, key string) string {
		keyArg := ""
		if key != "" {
			keyArg = fmt.Sprintf(`idempotencyKey: \"%s\", `, key)
		}
		return fmt.Sprintf(`{"query":"mutation { %s(%sinput: {destination: \"Lyon\", weightGrams: 900}) { id destination weightGrams } }"}`, field, keyArg)
	}
	// send answers one request and returns its data member; a refusal (such
	// as IDEMPOTENCY_IN_PROGRESS) is not a final answer and fails the bench.
	send := func(body string) ([]byte, error) {
		req := httptest.NewRequest(http.MethodPost, "/query", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Org", "bench")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		var res struct {
			Data   json.RawMessage
			Errors []any
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &res); err != nil || rec.Code != http.StatusOK || len(res.Errors) > 0 {
			return nil, fmt.Errorf("%s -> %d %s", body, rec.Code, rec.Body.String())
		}
		return res.Data, nil
	}
	// burst sends the bodies at once and returns when every one is answered.
	burst := func(bodies []string) (time.Duration, [][]byte) {
		var (
			wg    sync.WaitGroup
			start = make(chan struct{})
			data  = make([][]byte, len(bodies))
			errs  = make([]error, len(bodies))
		)
		for i, body := range bodies {
			wg.Go(func() {
				<-start
				data[i], errs[i] = send(body)
			})
		}
		t := time.Now()
		close(start)
		wg.Wait()
		elapsed := time.Since(t)
		for _, err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
		return elapsed, data
	}
	// settle lets the previous burst's aftermath (garbage, the database's
	// WAL writes) pass, so that every measurement starts from a quiet
	// machine.
	settle := func() {
		runtime.GC()
		time.Sleep(20 * time.Millisecond)
	}
	round := func(i int) (single, storm, plain time.Duration) {
		settle()
		// One request alone: the median of a few, one after the other.
		var ones []time.Duration
		for j := range 5 {
			t := time.Now()
			if _, err := send(body(field, fmt.Sprintf("single-%d-%d", i, j))); err != nil {
				b.Fatal(err)
			}
			ones = append(ones, time.Since(t))
		}
		slices.Sort(ones)
		single = ones[len(ones)/2]

		settle()
		dup := make([]string, stormSize)
		for j := range dup {
			dup[j] = body(field, fmt.Sprintf("storm-%d", i))
		}
		storm, data := burst(dup)
		for _, d := range data[1:] {
			if !bytes.Equal(d, data[0]) {
				b.Fatalf("duplicates got different answers:\n%s\n%s", data[0], d)
			}
		}

		settle()
		distinct := make([]string, stormSize)
		for j := range distinct {
			distinct[j] = body("createShipmentPlain", "")
		}
		plain, _ = burst(distinct)
		return single, storm, plain
	}

	round(-1) // warm up: the pool's connections, the statement caches
	var singles, storms, plains []time.Duration
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		single, storm, plain := round(i)
		singles, storms, plains = append(singles, single), append(storms, storm), append(plains, plain)
	}
	b.StopTimer()
	median := func(s []time.Duration) float64 {
		slices.Sort(s)
		return float64(s[len(s)/2])
	}
	single, storm, plain := median(singles), median(storms), median(plains)
	b.ReportMetric(single/1e3, "single-p50-µs")
	b.ReportMetric(storm/1e6, "storm-p50-ms")
	b.ReportMetric(plain/1e6, "plain256-p50-ms")
	b.ReportMetric(storm/single, "storm/single")
	b.ReportMetric(storm/plain, "storm/plain256")
}
