// Package hostile is the catalogue of the most expensive requests one
// tenant can send the example server (cmd/server): for each of the
// server's default request limits (idemhttp.Limits), the worst request just
// over it and, where one fits, the worst just under it, which the server
// parses, validates and answers. docs/limits.md publishes what each costs;
// graph's benchmark measures that cost, graph's tests bound it, and
// cmd/loadtest adversary measures another tenant's latency while one
// tenant sends them.
package hostile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// Request is one hostile request.
type Request struct {
	// Name says what it is, with its size where that is the point.
	Name string
	// Bound names the limit that bounds its cost.
	Bound string
	// Want is what the example server with its default limits answers:
	// the first error's extensions.code, "ok" (no error), or "HTTP 413".
	Want string
	// Method is POST unless set; ContentType is application/json unless
	// set.
	Method, ContentType string
	// Body is the request body.
	Body []byte
}

// NewHTTPRequest returns r as an HTTP request to url, as tenant.
func (r Request) NewHTTPRequest(url, tenant string) *http.Request {
	method, ct := r.Method, r.ContentType
	if method == "" {
		method = http.MethodPost
	}
	if ct == "" {
		ct = "application/json"
	}
	req, err := http.NewRequest(method, url, bytes.NewReader(r.Body))
	if err != nil {
		panic(err)
	}
	req.Header.Set("Content-Type", ct)
	req.Header.Set("X-Tenant-ID", tenant)
	return req
}

// Fresh returns r with a document no server has seen: its query starts
// with a comment naming n. A server remembers the documents it let
// through (idemhttp.OperationLimits) and the valid ones it parsed (gqlgen's
// query cache); the same text again costs it little.
func (r Request) Fresh(n int) Request {
	r.Body = bytes.Replace(r.Body, []byte(`"query":"`), fmt.Appendf(nil, `"query":"# %d\n`, n), 1)
	return r
}

// Outcome reads an answer as Request.Want does.
func Outcome(status int, body []byte) string {
	if status == http.StatusRequestEntityTooLarge {
		return "HTTP 413"
	}
	var r struct {
		Errors []struct {
			Extensions map[string]any `json:"extensions"`
		} `json:"errors"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return fmt.Sprintf("HTTP %d, not JSON", status)
	}
	if len(r.Errors) == 0 {
		return "ok"
	}
	if code, _ := r.Errors[0].Extensions["code"].(string); code != "" {
		return code
	}
	return "no code"
}

// The codes of the answers.
const (
	ok         = "ok"
	limit      = "OPERATION_LIMIT_EXCEEDED"
	invalid    = "GRAPHQL_VALIDATION_FAILED"
	badRequest = "BAD_REQUEST"
	tooLarge   = "HTTP 413"
	badInput   = "BAD_USER_INPUT"
)

// Catalogue returns the requests. order is an order of the sending tenant
// (the deep and the most expensive selections pay it).
func Catalogue(order string) []Request {
	mib := 1 << 20
	return []Request{
		// Fragments.
		gql("fragment chain, 4,000 fragments (issue 20: 11 s, 580 MB)", "MaxTokens", limit, chain(4000, "id ")),
		gql("fragment chain, 20,000 fragments (issue 20: over 4.7 GB)", "MaxTokens", limit, chain(20000, "id ")),
		gql("fragment chain, 1,650 fragments (at MaxTokens)", "MaxNodes", limit, chain(1650, "id ")),
		gql("fragment chain of spreads, 198 fragments (under MaxNodes)", "MaxNodes", ok, chain(198, "")),
		gql("fragment fan-out, 2^40 fields through 40 fragments", "MaxNodes", limit, fanOut(40)),
		gql("fragment fan-out, 2^6 fields through 6 fragments (under MaxFieldPairs)", "MaxFieldPairs", ok, fanOut(6)),
		gql("fragment cycle", "(refused as validation would)", invalid, "query { order(id: 1) { ...A } } fragment A on Order { payments { order { ...B } } } fragment B on Order { ...A }"),

		// Repeated fields.
		gql("id selected 20,000 times (issue 20: 35 s)", "MaxTokens", limit, "query { order(id: 1) {"+strings.Repeat(" id", 20000)+" } }"),
		gql("id selected 1,000 times (at MaxFields)", "MaxFieldPairs", limit, "query { order(id: 1) {"+strings.Repeat(" id", 1000)+" } }"),
		gql("id selected 141 times (under MaxFieldPairs)", "MaxFieldPairs", ok, "query { order(id: 1) {"+strings.Repeat(" id", 141)+" } }"),
		gql("order(id: n) 57 times, each pair a conflict (under MaxFieldPairs)", "MaxFieldPairs", invalid, conflicts(57)),
		gql("999 unknown fields (under MaxFields)", "MaxFields", invalid, unknownFields(999)),

		// Aliases, depth, complexity.
		gql("45,000 aliases (issue 12: 18.7 s)", "MaxTokens", limit, aliases(45000)),
		gql("selection 40 deep", "MaxDepth", limit, deep(order, 40)),
		gql("most expensive query allowed (500 fields, 63 aliases, 9 deep)", "MaxComplexity", ok, "query { order(id: "+order+") { "+tree(false, 7)+" } }"),

		// Directives, variables, values.
		gql("@skip 2,100 times on one field (under MaxTokens)", "MaxTokens", invalid, "query { order(id: 1) { id"+strings.Repeat(" @skip(if: false)", 2100)+" } }"),
		gql("3,700 variable definitions (under MaxTokens)", "MaxTokens", invalid, variables(3700)),
		gql("input object literal 999 deep", "parser nesting", invalid, `mutation { createOrder(idempotencyKey: "k", input: `+strings.Repeat("{amount: ", 999)+"1"+strings.Repeat("}", 999)+") { id } }"),
		gql("list literal 999 deep", "parser nesting", invalid, "query { order(id: "+strings.Repeat("[", 999)+"1"+strings.Repeat("]", 999)+") { id } }"),
		gql("string argument of 1 MiB", "MaxBodyBytes", badInput, `query { order(id: "`+strings.Repeat("9", mib-100)+`") { id } }`),
		post("variables: an input object of 1 MiB, 90,000 fields", "MaxBodyBytes", invalid, map[string]any{
			"query":     `mutation($in: CreateOrderInput!) { createOrder(idempotencyKey: "k", input: $in) { id } }`,
			"variables": map[string]any{"in": wideObject(90000)},
		}),
		{Name: "variables: JSON nested 500,000 deep (1 MiB)", Bound: "MaxBodyBytes", Want: badRequest,
			Body: []byte(`{"query":"{ __typename }","variables":{"v":` + strings.Repeat("[", mib/2-40) + strings.Repeat("]", 1) + `}}`)},

		// Documents.
		post("2,900 operations in one document", "MaxTokens", ok, map[string]any{"query": operations(2900), "operationName": "Q0"}),
		gql("1 MiB of comments", "MaxTokens", limit, strings.Repeat("#\n", mib/3-20)+"{ __typename }"),
		gql("1 MiB of white space", "MaxBodyBytes", ok, strings.Repeat(" ", mib-50)+"{ __typename }"),
		gql("introspection, GraphiQL's query", "MaxFields", ok, introspection),
		gql("introspection nested past gqlparser's depth", "MaxIntrospectionDepth", invalid, "{ __schema { types { fields { type { fields { type { fields { type { name } } } } } } } } }"),

		// Transport.
		{Name: "batch: a JSON array of 1 MiB", Bound: "MaxBodyBytes", Want: badRequest, Body: batch(mib - 100)},
		{Name: "GET", Bound: "transport", Want: badRequest, Method: http.MethodGet},
		{Name: "8 MiB body, declared", Bound: "MaxBodyBytes", Want: tooLarge, Body: padded(8 << 20)},
	}
}

func gql(name, bound, want, query string) Request {
	return post(name, bound, want, map[string]any{"query": query})
}

func post(name, bound, want string, body map[string]any) Request {
	b, err := json.Marshal(body)
	if err != nil {
		panic(err)
	}
	return Request{Name: name, Bound: bound, Want: want, Body: b}
}

// chain is issue 20's fragment chain: fragment Fi on Order { id ...Fi+1 },
// with each fragment's own selection (before the spread).
func chain(n int, own string) string {
	var b strings.Builder
	b.WriteString("query { order(id: 1) { ...F0 } }\n")
	for i := range n {
		if i == n-1 {
			fmt.Fprintf(&b, "fragment F%d on Order { id }\n", i)
		} else {
			fmt.Fprintf(&b, "fragment F%d on Order { %s...F%d }\n", i, own, i+1)
		}
	}
	return b.String()
}

// fanOut selects 2^n fields through n fragments that each spread the one
// before twice.
func fanOut(n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "query { order(id: 1) { ...F%d } }\nfragment F0 on Order { id }\n", n)
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "fragment F%d on Order { ...F%d ...F%d }\n", i, i-1, i-1)
	}
	return b.String()
}

// conflicts selects order n times under one name with n different ids.
func conflicts(n int) string {
	var b strings.Builder
	b.WriteString("query {")
	for i := range n {
		fmt.Fprintf(&b, " order(id: %d) { id }", i)
	}
	b.WriteString(" }")
	return b.String()
}

func unknownFields(n int) string {
	var b strings.Builder
	b.WriteString("query { order(id: 1) {")
	for i := range n {
		fmt.Fprintf(&b, " nope%d", i)
	}
	b.WriteString(" } }")
	return b.String()
}

func aliases(n int) string {
	var b strings.Builder
	b.WriteString(`mutation { createOrder(idempotencyKey: "aliases", input: {amount: 100, currency: "EUR"}) {`)
	for i := range n {
		fmt.Fprintf(&b, " a%d: currency", i)
	}
	b.WriteString(" } }")
	return b.String()
}

// deep pays order with a selection depth deep; the payment is refused
// before it runs.
func deep(order string, depth int) string {
	var open, close strings.Builder
	for d := 2; d < depth; d++ {
		if d%2 == 0 {
			open.WriteString("order { ")
		} else {
			open.WriteString("payments { ")
		}
		close.WriteString(" }")
	}
	return fmt.Sprintf(`mutation { createPayment(idempotencyKey: "deep", input: {orderID: %s, amount: 100}) { %sid%s } }`,
		order, open.String(), close.String())
}

// ExpensivePayment pays order with the costliest selection the default
// limits allow: a binary tree of 127 objects, payment and order in turn,
// each with its scalar fields and each edge a query of its own (some 500
// fields, 63 aliases, 9 deep).
func ExpensivePayment(key, order string) string {
	return fmt.Sprintf(`mutation { createPayment(idempotencyKey: %q, input: {orderID: %s, amount: 100}) { %s } }`, key, order, tree(true, 7))
}

// tree is a binary tree of levels of payments and orders in turn, each
// edge once as it is and once under an alias.
func tree(onPayment bool, levels int) string {
	leaves, edge := "id amount providerChargeID", "order"
	if !onPayment {
		leaves, edge = "id amount currency paid", "payments"
	}
	if levels == 1 {
		return leaves
	}
	child := tree(!onPayment, levels-1)
	return fmt.Sprintf("%s %s { %s } x: %s { %s }", leaves, edge, child, edge, child)
}

func variables(n int) string {
	var b strings.Builder
	b.WriteString("query(")
	for i := range n {
		fmt.Fprintf(&b, "$v%d: ID ", i)
	}
	b.WriteString(") { order(id: 1) { id } }")
	return b.String()
}

func wideObject(n int) map[string]any {
	m := map[string]any{"amount": 1, "currency": "EUR"}
	for i := range n {
		m[fmt.Sprintf("f%d", i)] = 0
	}
	return m
}

func operations(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "query Q%d { __typename }\n", i)
	}
	return b.String()
}

// batch is a JSON array of n bytes of operations.
func batch(n int) []byte {
	one := `{"query":"{ __typename }"},`
	b := []byte("[" + strings.Repeat(one, (n-2)/len(one)))
	b[len(b)-1] = ']'
	return b
}

// padded is a valid request of n bytes: a small query and spaces.
func padded(n int) []byte {
	b := bytes.Repeat([]byte(" "), n)
	copy(b, `{"query":"{ __typename }","x":"`)
	copy(b[n-2:], `"}`)
	return b
}

// introspection is GraphiQL's introspection query.
const introspection = `query IntrospectionQuery {
  __schema {
    queryType { name }
    mutationType { name }
    subscriptionType { name }
    types { ...FullType }
    directives { name description locations args { ...InputValue } }
  }
}
fragment FullType on __Type {
  kind name description
  fields(includeDeprecated: true) { name description args { ...InputValue } type { ...TypeRef } isDeprecated deprecationReason }
  inputFields { ...InputValue }
  interfaces { ...TypeRef }
  enumValues(includeDeprecated: true) { name description isDeprecated deprecationReason }
  possibleTypes { ...TypeRef }
}
fragment InputValue on __InputValue { name description type { ...TypeRef } defaultValue }
fragment TypeRef on __Type {
  kind name
  ofType { kind name ofType { kind name ofType { kind name ofType { kind name ofType { kind name ofType { kind name ofType { kind name } } } } } } }
}`
