package idemclient_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"github.com/goovo/idem/idemclient"
)

// A payment whose first attempt finds its key held by an earlier, abandoned
// attempt: the server answers IDEMPOTENCY_IN_PROGRESS, Do waits and sends
// the same request again, and gets the result. (The server here is a stub
// that answers like the example application does.)
func ExampleClient_Do() {
	var calls atomic.Int32
	stub := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		if calls.Add(1) == 1 {
			fmt.Fprint(w, `{"errors":[{"message":"a request with this idempotency key is still being processed; retry later with the same key","path":["createPayment"],"extensions":{"code":"IDEMPOTENCY_IN_PROGRESS","idempotencyKey":"pay-order-42","retryAfterSeconds":1}}],"data":null,"extensions":{"idempotency":{"createPayment":{"key":"pay-order-42","outcome":"refused","replayed":false}}}}`)
			return
		}
		fmt.Fprint(w, `{"data":{"createPayment":{"id":"7","order":{"paid":true}}},"extensions":{"idempotency":{"createPayment":{"key":"pay-order-42","outcome":"executed","replayed":false}}}}`)
	}))
	defer stub.Close()

	c := &idemclient.Client{
		URL:        stub.URL,
		Header:     http.Header{"X-Tenant-ID": {"acme"}},
		MaxBackoff: 10 * time.Millisecond, // caps the server's retryAfterSeconds
		OnRetry: func(r idemclient.Retry) {
			fmt.Printf("attempt %d: %s, retrying\n", r.Attempt, r.Reason)
		},
	}
	key := "pay-order-42" // in real code: idemclient.NewKey(), stored with the intent
	res, err := c.Do(context.Background(), idemclient.Request{
		Query: `mutation($key: String!, $order: ID!, $amount: Int!) {
  createPayment(idempotencyKey: $key, input: {orderID: $order, amount: $amount}) { id order { paid } }
}`,
		Variables: map[string]any{"order": "42", "amount": 1200},
		Key:       key,
	})
	if err != nil {
		log.Fatal(err)
	}
	var out struct {
		CreatePayment struct {
			ID    string
			Order struct{ Paid bool }
		}
	}
	if err := res.Decode(&out); err != nil {
		log.Fatal(err)
	}
	fmt.Println("payment", out.CreatePayment.ID, "paid:", out.CreatePayment.Order.Paid)
	fmt.Println("outcome:", res.Outcome("createPayment"), "attempts:", res.Attempts, "replayed:", res.Replayed)
	// Output:
	// attempt 1: in-progress, retrying
	// payment 7 paid: true
	// outcome: executed attempts: 2 replayed: false
}

// Make one key per intent, when the intent is created.
func ExampleNewKey() {
	key := idemclient.NewKey()
	fmt.Println(len(key) >= 22) // 128 bits or more, printable ASCII
	// Output: true
}
