package idemkey_test

import (
	"fmt"

	"github.com/goovo/idem/internal/idemkey"
)

func ExampleHash() {
	// Logs carry this instead of the key.
	fmt.Println(idemkey.Hash("order-42"))
	// Output: 3bf8b157c423
}
