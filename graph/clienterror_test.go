package graph_test

import (
	"strings"
	"testing"

	"github.com/goovo/idem/idemcode"
	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/testkit"
)

// Issue 32: an error a client sees is coded and worded for the client.
// Before, an id that is not a number answered strconv's text
// ("strconv.Atoi: parsing \"abc\": invalid syntax"), an Int over 32 bits
// was taken although GraphQL's Int is 32-bit, and 1e400 answered "cannot
// use string as Int". Reading arguments does not touch the database:
// SQLite.
func TestArgumentErrorsAreWordedForTheClient(t *testing.T) {
	a := newApp(t, idemtest.SQLite)
	order := a.newOrder("acme", 100)
	orders := a.allOrders()
	cases := []struct {
		name, query string
		vars        map[string]any
		raw         string // the body, when JSON can say what Go cannot
		says        string // in the message
	}{
		{"id not a number", `{ order(id: "abc") { id } }`, nil, "", "an ID of this API"},
		{"id a variable, not a number", `query($id: ID!) { order(id: $id) { id } }`, map[string]any{"id": "1x"}, "", "an ID of this API"},
		{"payment of an order id not a number", `mutation { createPayment(idempotencyKey: "p1", input: {orderID: "abc", amount: 100}) { id } }`, nil, "", "an ID of this API"},
		{"Int over 32 bits, literal", `mutation { createOrder(idempotencyKey: "o1", input: {amount: 2147483648, currency: "EUR"}) { id } }`, nil, "", "32-bit"},
		{"Int over 32 bits, variable", `mutation($a: Int!) { createOrder(idempotencyKey: "o2", input: {amount: $a, currency: "EUR"}) { id } }`, map[string]any{"a": 2147483648}, "", "32-bit"},
		{"Int 1e400, literal", `mutation { createOrder(idempotencyKey: "o3", input: {amount: 1e400, currency: "EUR"}) { id } }`, nil, "", "Int"},
		{"Int 1e400, variable", "", nil, `{"query": "mutation($a: Int!) { createOrder(idempotencyKey: \"o4\", input: {amount: $a, currency: \"EUR\"}) { id } }", "variables": {"a": 1e400}}`, "Int"},
		{"Int below 32 bits, payment", `mutation($o: ID!) { createPayment(idempotencyKey: "p2", input: {orderID: $o, amount: -2147483649}) { id } }`, map[string]any{"o": order}, "", "32-bit"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var r *testkit.Response
			if tc.raw != "" {
				r = a.postRaw("acme", []byte(tc.raw))
			} else {
				r = a.do("acme", tc.query, tc.vars)
			}
			if len(r.Errors) == 0 {
				t.Fatalf("accepted: %s", r.Body)
			}
			e := r.Errors[0]
			msg := e.Message
			if code, _ := e.Extensions["code"].(string); code == "" || code == string(idemcode.InternalServerError) {
				t.Errorf("code %q: %s", code, r.Body)
			}
			for _, goText := range []string{"strconv", "parsing", "invalid syntax", "cannot use", "json:", "int64"} {
				if strings.Contains(msg, goText) {
					t.Errorf("the message shows Go's text (%q): %s", goText, msg)
				}
			}
			if !strings.Contains(msg, tc.says) {
				t.Errorf("the message does not say %q: %s", tc.says, msg)
			}
		})
	}
	if got := a.allOrders(); got != orders {
		t.Fatalf("%d orders created by refused requests", got-orders)
	}
}
