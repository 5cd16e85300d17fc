package idemhttp_test

import (
	"fmt"

	"github.com/goovo/idem"
	"github.com/goovo/idem/idemhttp"
)

// The Idempotency-Key header in the IETF draft's form, a structured-field
// string, and in the bare form; a list is refused.
func ExampleParseKeyHeader() {
	for _, v := range []string{`"8e03978e-40d5"`, `8e03978e-40d5`, `"say \"hi\""`, `"a", "b"`} {
		key, err := idemhttp.ParseKeyHeader([]string{v})
		fmt.Printf("%-16s -> %q %v\n", v, key, err)
	}
	// Output:
	// "8e03978e-40d5"  -> "8e03978e-40d5" <nil>
	// 8e03978e-40d5    -> "8e03978e-40d5" <nil>
	// "say \"hi\""     -> "say \"hi\"" <nil>
	// "a", "b"         -> "" IDEMPOTENCY_KEY_INVALID: the Idempotency-Key header is a list; send one key
}

func ExampleFormatKeyHeader() {
	fmt.Println(idemhttp.FormatKeyHeader(`say "hi"`))
	// Output: "say \"hi\""
}

// Limits are on by default; a zero field keeps its default, a negative one
// turns the limit off.
func ExampleLimits() {
	cfg := idem.Config{
		// Backend and Tenant as usual.
		Limits: idemhttp.Limits{
			MaxBodyBytes: 256 << 10, // a smaller body limit
			MaxAliases:   -1,        // no alias limit
		},
	}
	fmt.Println(cfg.Limits.MaxFields == 0, idemhttp.DefaultMaxFields)
	// Output: true 1000
}
