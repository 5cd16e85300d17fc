package idemcode_test

import (
	"fmt"

	"github.com/goovo/idem/idemcode"
)

// A client reads extensions.code and asks idemcode whether retrying the
// same request, with the same key, can change the answer.
func ExampleCode_Retryable() {
	for _, code := range []string{"IDEMPOTENCY_IN_PROGRESS", "IDEMPOTENCY_KEY_REUSED", "INTERNAL_SERVER_ERROR", "ORDER_ALREADY_PAID"} {
		c := idemcode.Code(code)
		fmt.Printf("%s: known %v, retryable %v\n", c, c.Known(), c.Retryable())
	}
	// Output:
	// IDEMPOTENCY_IN_PROGRESS: known true, retryable true
	// IDEMPOTENCY_KEY_REUSED: known true, retryable false
	// INTERNAL_SERVER_ERROR: known true, retryable true
	// ORDER_ALREADY_PAID: known false, retryable false
}
