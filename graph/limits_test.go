package graph_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/goovo/idem/graph"
	"github.com/goovo/idem/idemcode"
	"github.com/goovo/idem/idemhttp"
	"github.com/goovo/idem/idemschema"
	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/testkit"
	"github.com/goovo/idem/internal/testkit/hostile"
)

// aliasBomb is the attack of issue 12: one field of createOrder's result
// under n aliases. Unbounded, gqlgen spends time quadratic in n collecting
// the fields (18.7 s for 45,000) inside the mutation's transaction.
func aliasBomb(key string, n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, `mutation { createOrder(idempotencyKey: %q, input: {amount: 100, currency: "EUR"}) {`, key)
	for i := range n {
		fmt.Fprintf(&b, " a%d: currency", i)
	}
	b.WriteString(" } }")
	return b.String()
}

// deepPayment pays order with a selection that nests depth deep (the
// root field at depth 1): order { payments { order { … id } } }.
func deepPayment(key, order string, depth int) string {
	var open, close strings.Builder
	for d := 2; d < depth; d++ {
		if d%2 == 0 {
			open.WriteString("order { ")
		} else {
			open.WriteString("payments { ")
		}
		close.WriteString(" }")
	}
	return fmt.Sprintf(`mutation { createPayment(idempotencyKey: %q, input: {orderID: %s, amount: 100}) { %sid%s } }`,
		key, order, open.String(), close.String())
}

// fragmentBomb selects 2^n fields through n fragments that each spread the
// one before twice: a short document whose naive expansion (gqlgen's
// complexity calculation walks every spread) is exponential.
func fragmentBomb(key string, n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, `mutation { createOrder(idempotencyKey: %q, input: {amount: 100, currency: "EUR"}) { ...F%d } }`, key, n)
	b.WriteString("\nfragment F0 on Order { currency }")
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "\nfragment F%d on Order { ...F%d ...F%d }", i, i-1, i-1)
	}
	return b.String()
}

// An operation over a limit is refused before anything runs: no claim, no
// resolver, no database work, whatever the backend.
func TestHostileOperationsAreRefusedBeforeAnythingRuns(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		a := newApp(t, b)
		order := a.newOrder("acme", 100)
		before := a.allOrders()
		cases := []struct {
			name, query, code string
		}{
			{"alias bomb", aliasBomb("bomb", 45000), string(idemcode.OperationLimitExceeded)},
			{"aliases at the root of a query", "{" + rootAliases(45000) + " }", string(idemcode.OperationLimitExceeded)},
			{"deep selection", deepPayment("deep", order, 40), string(idemcode.OperationLimitExceeded)},
			{"fragment bomb", fragmentBomb("frag", 40), string(idemcode.OperationLimitExceeded)},
		}
		for _, c := range cases {
			r := a.do("mallory", c.query, nil)
			if r.Code() != c.code || len(r.Data) > 0 && string(r.Data) != "null" {
				t.Errorf("%s: %.300s", c.name, r.Body)
			}
		}
		if after := a.allOrders(); after != before {
			t.Fatalf("refused operations stored %d orders", after-before)
		}
		if n := a.allPayments(); n != 0 {
			t.Fatalf("a refused payment stored %d payments", n)
		}
		if cs := a.charges("mallory", order); len(cs) != 0 {
			t.Fatalf("a refused payment charged: %v", cs)
		}

		// At the limits, the same shapes run.
		if r := a.do("acme", aliasBomb("ok-aliases", idemhttp.DefaultMaxAliases), nil); len(r.Errors) > 0 {
			t.Fatalf("%d aliases, the limit: %.300s", idemhttp.DefaultMaxAliases, r.Body)
		}
		if r := a.do("acme", deepPayment("ok-depth", order, idemhttp.DefaultMaxDepth), nil); len(r.Errors) > 0 {
			t.Fatalf("depth %d, the limit: %.300s", idemhttp.DefaultMaxDepth, r.Body)
		}
	})
}

func rootAliases(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, " t%d: __typename", i)
	}
	return b.String()
}

// Each limit is configurable, complexity included (gqlgen's own), and a
// negative value turns it off.
func TestLimitsAreConfigurable(t *testing.T) {
	a := newApp(t, idemtest.SQLite, func(o *graph.Options) {
		o.Limits = idemhttp.Limits{MaxAliases: -1, MaxFields: -1, MaxComplexity: 5, MaxDepth: 2}
	})
	// 200 aliases: over the default, allowed with the limit off, but over
	// the complexity of 5.
	r := a.do("acme", aliasBomb("k1", 200), nil)
	if r.Code() != "COMPLEXITY_LIMIT_EXCEEDED" {
		t.Fatalf("complexity 201 over 5: %.300s", r.Body)
	}
	if r := a.do("acme", aliasBomb("k2", 4), nil); len(r.Errors) > 0 {
		t.Fatalf("complexity 5: %.300s", r.Body)
	}
	order := a.newOrder("acme", 100)
	if r := a.do("acme", deepPayment("k3", order, 3), nil); r.Code() != string(idemcode.OperationLimitExceeded) || !strings.Contains(r.Errors[0].Message, "limit is 2") {
		t.Fatalf("depth 3 over 2: %.300s", r.Body)
	}
}

// A body over the limit is refused with HTTP 413 and a GraphQL error: when
// its length is declared, before a byte of it is read; when it is not
// (chunked), as soon as the limit is reached.
func TestLargeBodiesAreRefusedBeforeTheyAreRead(t *testing.T) {
	a := newApp(t, idemtest.SQLite)
	addr := strings.TrimPrefix(a.URL, "http://")

	// A declared 100 MB that never comes: the answer cannot wait for it.
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /query HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nX-Tenant-ID: acme\r\nContent-Length: %d\r\n\r\n{\"query\":", addr, 100<<20)
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer before the body was sent: %v", err)
	}
	checkTooLarge(t, "declared length", res)

	// Chunked: no length announced; refused once the limit is read.
	big := `{"query":"` + strings.Repeat(" ", 2<<20) + `{ __typename }"}`
	req, _ := http.NewRequest(http.MethodPost, a.URL+"/query", io.MultiReader(strings.NewReader(big)))
	req.Header.Set("Content-Type", "application/json")
	req.ContentLength = -1
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	checkTooLarge(t, "chunked", res)

	// Under the limit, the same padding is fine.
	small := `{"query":"` + strings.Repeat(" ", 512<<10) + `{ __typename }"}`
	res, err = http.Post(a.URL+"/query", "application/json", strings.NewReader(small))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !bytes.Contains(body, []byte(`"__typename":"Query"`)) {
		t.Fatalf("half a MiB: %d %s", res.StatusCode, body)
	}
}

func checkTooLarge(t *testing.T, what string, res *http.Response) {
	t.Helper()
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	var r struct {
		Errors []testkit.Error `json:"errors"`
	}
	if err := json.Unmarshal(body, &r); err != nil || res.StatusCode != http.StatusRequestEntityTooLarge ||
		len(r.Errors) != 1 || r.Errors[0].Code() != string(idemcode.BodyTooLarge) {
		t.Fatalf("%s: %d %s", what, res.StatusCode, body)
	}
}

// allOrders counts order rows, finished or not.
func (a *app) allOrders() int {
	a.t.Helper()
	n, err := a.Client.Order.Query().Count(idemschema.IncludeUnfinished(context.Background()))
	if err != nil {
		a.t.Fatalf("count orders: %v", err)
	}
	return n
}

// With the limits off, the hook still refuses to fingerprint a selection
// that expands beyond reason (it prints it expanded): a fragment bomb is
// IDEMPOTENCY_REQUEST_TOO_LARGE, not 2^40 fields of work.
func TestFingerprintIsBoundedWithTheLimitsOff(t *testing.T) {
	a := newApp(t, idemtest.SQLite, func(o *graph.Options) {
		o.Limits = idemhttp.Limits{MaxTokens: -1, MaxFields: -1, MaxAliases: -1, MaxDepth: -1, MaxFieldPairs: -1, MaxNodes: -1, MaxComplexity: -1}
	})
	if r := a.do("mallory", fragmentBomb("frag", 40), nil); r.Code() != string(idemcode.RequestTooLarge) {
		t.Fatalf("fragment bomb: %.300s", r.Body)
	}
	if n := a.allOrders(); n != 0 {
		t.Fatalf("%d orders", n)
	}
}

// The limits are measured on the document before gqlgen validates it:
// a document that is both invalid (an unknown field) and over a limit is
// refused as over the limit, not as invalid. Validation, which walks every
// fragment again for each definition that reaches it and compares every
// pair of fields sharing a response name, never sees it.
func TestDocumentsAreMeasuredBeforeValidation(t *testing.T) {
	a := newApp(t, idemtest.SQLite)
	order := a.newOrder("acme", 100)
	invalid := " nope"
	cases := []struct {
		name, query, limit string
	}{
		{"tokens", "{ order(id: 1) {" + invalid + strings.Repeat(" id", idemhttp.DefaultMaxTokens) + " } }", "tokens"},
		{"fields", "{ order(id: 1) {" + invalid + strings.Repeat(" id amount currency paid", 300) + " } }", "fields"},
		{"aliases", "{" + invalid + rootAliases(idemhttp.DefaultMaxAliases+1) + " }", "aliased fields"},
		{"depth", strings.Replace(deepPayment("deep", order, idemhttp.DefaultMaxDepth+1), "{ id", "{"+invalid+" id", 1), "deep"},
		{"nodes", chainOfSpreads(300, invalid), "nodes"},
		{"pairs", "{ order(id: 1) {" + invalid + strings.Repeat(" id", 200) + " } }", "pairs of fields"},
	}
	for _, c := range cases {
		r := a.do("mallory", c.query, nil)
		if r.Code() != string(idemcode.OperationLimitExceeded) || !strings.Contains(r.Errors[0].Message, c.limit) {
			t.Errorf("%s: %.300s", c.name, r.Body)
		}
	}
	// Under the limits, the same document is validated.
	if r := a.do("mallory", chainOfSpreads(20, invalid), nil); r.Code() != "GRAPHQL_VALIDATION_FAILED" {
		t.Errorf("under the limits: %.300s", r.Body)
	}
}

// chainOfSpreads is a query whose selection is a chain of n fragments,
// each spreading the next; the last selects id and extra.
func chainOfSpreads(n int, extra string) string {
	var b strings.Builder
	b.WriteString("query { order(id: 1) { ...F0 } }")
	for i := range n - 1 {
		fmt.Fprintf(&b, "\nfragment F%d on Order { ...F%d }", i, i+1)
	}
	fmt.Fprintf(&b, "\nfragment F%d on Order { id%s }", n-1, extra)
	return b.String()
}

// A fragment cycle cannot be measured by expanding the fragments: it is
// refused as validation refuses it, whether the cycle gains depth or not,
// and a spread of an unknown fragment is left to validation.
func TestFragmentCyclesAndUnknownFragmentsAreValidationErrors(t *testing.T) {
	a := newApp(t, idemtest.SQLite)
	for _, q := range []string{
		"query { order(id: 1) { ...A } } fragment A on Order { ...B } fragment B on Order { id ...A }",
		"query { order(id: 1) { ...A } } fragment A on Order { payments { order { ...A } } }",
		"query { order(id: 1) { id } } fragment A on Order { ...A }",
		"query { order(id: 1) { ...Nowhere } }",
	} {
		if r := a.do("mallory", q, nil); r.Code() != "GRAPHQL_VALIDATION_FAILED" {
			t.Errorf("%s: %.300s", q, r.Body)
		}
	}
}

// The worst request under and over each default limit (package hostile,
// the table of docs/limits.md) gets its answer, having cost the server
// little memory, and a refusal is small. Memory, not time, is asserted:
// bytes allocated until the answer do not depend on how busy the machine
// is. Before the limits ran ahead of validation, the first of these (a
// chain of 4,000 fragments) allocated 580 MB.
func TestWorstRequestsCostLittle(t *testing.T) {
	a := newApp(t, idemtest.SQLite)
	order := a.newOrder("mallory", 100)
	h := a.Server.Config.Handler
	const budget, smallAnswer = 32 << 20, 32 << 10
	for _, req := range hostile.Catalogue(order) {
		allocated, status, body := allocatedBy(h, req.NewHTTPRequest("/query", "mallory"))
		if got := hostile.Outcome(status, body); got != req.Want {
			t.Errorf("%s: %s, want %s: %.300s", req.Name, got, req.Want, body)
		}
		if allocated > budget {
			t.Errorf("%s: %d MB allocated until the answer, more than %d", req.Name, allocated>>20, budget>>20)
		}
		if req.Want != "ok" && len(body) > smallAnswer {
			t.Errorf("%s: a refusal of %d bytes: %.300s", req.Name, len(body), body)
		}
	}
}

// allocatedBy serves req in process and returns the bytes the process
// allocated meanwhile, and the answer.
func allocatedBy(h http.Handler, req *http.Request) (uint64, int, []byte) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc, rec.Code, rec.Body.Bytes()
}

// Requests that are not GraphQL requests the server takes (another
// method, another Content-Type, a batch: a JSON array of operations, a
// body that is not JSON) are refused with BAD_REQUEST and a short
// message that quotes none of the body; gqlgen answered them without a
// code, and with the whole body in the message.
func TestTransportAndBatchRefusalsAreCodedAndSmall(t *testing.T) {
	a := newApp(t, idemtest.SQLite)
	marker := strings.Repeat("echo-me-", 1<<14) // 128 KiB
	one := `{"query":"{ __typename }","extensions":{"x":"` + marker + `"}}`
	cases := []struct {
		name, method, contentType, body string
	}{
		{"GET", http.MethodGet, "", ""},
		{"text/plain", http.MethodPost, "text/plain", `{"query":"{ __typename }"}`},
		{"batch", http.MethodPost, "application/json", "[" + one + "," + one + "]"},
		{"not JSON", http.MethodPost, "application/json", `{"query": "` + marker},
		{"not an object", http.MethodPost, "application/json", `"` + marker + `"`},
	}
	for _, c := range cases {
		req, _ := http.NewRequest(c.method, a.Endpoint, strings.NewReader(c.body))
		if c.contentType != "" {
			req.Header.Set("Content-Type", c.contentType)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusBadRequest || hostile.Outcome(res.StatusCode, body) != string(idemcode.BadRequest) ||
			len(body) > 512 || bytes.Contains(body, []byte("echo-me")) {
			t.Errorf("%s: %d %.600s", c.name, res.StatusCode, body)
		}
	}
	// An argument's value is not quoted back whole either.
	r := a.do("mallory", `{ order(id: "`+strings.Repeat("9", 100_000)+`") { id } }`, nil)
	if r.Code() != string(idemcode.BadUserInput) || len(r.Body) > 512 {
		t.Errorf("a long argument: %.600s", r.Body)
	}
}

// An answer without data shows at most 100 errors, and says how many more
// there were: a document within the limits can break a rule thousands of
// times (here, 3,000 unused variables).
func TestRequestErrorsAreCapped(t *testing.T) {
	a := newApp(t, idemtest.SQLite)
	var b strings.Builder
	b.WriteString("query(")
	for i := range 3000 {
		fmt.Fprintf(&b, "$v%d: ID ", i)
	}
	b.WriteString(") { __typename }")
	r := a.do("mallory", b.String(), nil)
	if len(r.Errors) != 101 || r.Code() != "GRAPHQL_VALIDATION_FAILED" ||
		r.Errors[100].Message != "2900 more errors not shown" || r.Errors[100].Code() != "GRAPHQL_VALIDATION_FAILED" {
		t.Fatalf("%d errors: %.300s", len(r.Errors), r.Body)
	}
}
