package idemhttp_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/goovo/idem"
	"github.com/goovo/idem/idemhttp"
)

func TestParseKeyHeader(t *testing.T) {
	long := strings.Repeat("k", idem.MaxKeyLength)
	tests := []struct {
		name   string
		values []string
		key    string // "" when refused
	}{
		// The draft's form: a structured-field String.
		{"quoted", []string{`"8e03978e-40d5-43e8-bc93-6894a57f9324"`}, "8e03978e-40d5-43e8-bc93-6894a57f9324"},
		{"quoted, escaped quote", []string{`"a\"b"`}, `a"b`},
		{"quoted, escaped backslash", []string{`"a\\b"`}, `a\b`},
		{"quoted, spaces inside", []string{`"order 42 pay"`}, "order 42 pay"},
		{"quoted, surrounding spaces", []string{`  "abc"  `}, "abc"},
		{"quoted, 255 bytes", []string{`"` + long + `"`}, long},
		// Stripe's bare form.
		{"bare", []string{"8e03978e-40d5-43e8-bc93-6894a57f9324"}, "8e03978e-40d5-43e8-bc93-6894a57f9324"},
		{"bare token", []string{"abc"}, "abc"},
		{"bare with = and backslash", []string{`a=b\c`}, `a=b\c`},
		{"bare, surrounding spaces", []string{" abc\t"}, "abc"},
		{"bare, 255 bytes", []string{long}, long},
		// Refused: IDEMPOTENCY_KEY_INVALID.
		{"list of strings", []string{`"a", "b"`}, ""},
		{"list of tokens", []string{"a, b"}, ""},
		{"list without space", []string{"a,b"}, ""},
		{"trailing comma", []string{`"a",`}, ""},
		{"parameters on a string", []string{`"a";x=1`}, ""},
		{"parameters on a token", []string{"a;x=1"}, ""},
		{"parameter after space", []string{`"a" ;x`}, ""},
		{"header twice", []string{`"a"`, `"a"`}, ""},
		{"header twice, bare", []string{"a", "b"}, ""},
		{"empty", []string{""}, ""},
		{"only spaces", []string{"   "}, ""},
		{"empty string", []string{`""`}, ""},
		{"unterminated", []string{`"abc`}, ""},
		{"text after the string", []string{`"abc"def`}, ""},
		{"bad escape", []string{`"a\nb"`}, ""},
		{"escape at the end", []string{`"abc\`}, ""},
		{"quote inside bare", []string{`ab"c`}, ""},
		{"space inside bare", []string{"a b"}, ""},
		{"control character in string", []string{"\"a\x01b\""}, ""},
		{"non-ASCII in string", []string{`"clé"`}, ""},
		{"non-ASCII bare", []string{"clé"}, ""},
		{"too long quoted", []string{`"` + long + `k"`}, ""},
		{"too long bare", []string{long + "k"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key, err := idemhttp.ParseKeyHeader(tt.values)
			if tt.key != "" {
				if err != nil || key != tt.key {
					t.Fatalf("ParseKeyHeader(%q) = %q, %v; want %q", tt.values, key, err, tt.key)
				}
				return
			}
			if err == nil || !errors.Is(err, idem.ErrKeyInvalid) {
				t.Fatalf("ParseKeyHeader(%q) = %q, %v; want IDEMPOTENCY_KEY_INVALID", tt.values, key, err)
			}
			if len(tt.values[0]) > idem.MaxKeyLength && strings.Contains(err.Error(), tt.values[0]) {
				t.Fatalf("the refusal echoes a %d-byte header", len(tt.values[0]))
			}
		})
	}
}

func TestFormatKeyHeader(t *testing.T) {
	for key, want := range map[string]string{
		"abc":          `"abc"`,
		`a"b`:          `"a\"b"`,
		`a\b`:          `"a\\b"`,
		"order 42 pay": `"order 42 pay"`,
	} {
		if got := idemhttp.FormatKeyHeader(key); got != want {
			t.Errorf("FormatKeyHeader(%q) = %s, want %s", key, got, want)
		}
		if back, err := idemhttp.ParseKeyHeader([]string{want}); err != nil || back != key {
			t.Errorf("ParseKeyHeader(%s) = %q, %v; want %q back", want, back, err, key)
		}
	}
}

// FuzzParseKeyHeader checks the parser against the rules it implements, on
// any header value: a key it returns is valid and reads back from its
// quoted form; a quoted valid key is always accepted; and it never panics.
// The seeds run in every plain go test.
func FuzzParseKeyHeader(f *testing.F) {
	for _, seed := range []string{
		`"abc"`, "abc", `"a\"b"`, `"a\\b"`, `"a", "b"`, "a, b", `"a";x=1`, "a;x=1",
		`""`, "", `"abc`, `"abc"def`, `"a\nb"`, "a b", `ab"c`, "\"a\x01b\"", "clé",
		`  "abc"  `, "8e03978e-40d5-43e8-bc93-6894a57f9324", `"\`, `\`, `"a" , "b"`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, value string) {
		key, err := idemhttp.ParseKeyHeader([]string{value})
		if err != nil {
			if !errors.Is(err, idem.ErrKeyInvalid) {
				t.Fatalf("ParseKeyHeader(%q): %v is not IDEMPOTENCY_KEY_INVALID", value, err)
			}
		} else {
			if verr := idem.ValidateKey(key); verr != nil {
				t.Fatalf("ParseKeyHeader(%q) = %q, an invalid key: %v", value, key, verr)
			}
			if back, err := idemhttp.ParseKeyHeader([]string{idemhttp.FormatKeyHeader(key)}); err != nil || back != key {
				t.Fatalf("%q does not read back from %s: %q, %v", key, idemhttp.FormatKeyHeader(key), back, err)
			}
		}
		// Any valid key, quoted, is accepted as itself.
		if idem.ValidateKey(value) == nil {
			if back, err := idemhttp.ParseKeyHeader([]string{idemhttp.FormatKeyHeader(value)}); err != nil || back != value {
				t.Fatalf("the quoted form of the valid key %q was refused: %q, %v", value, back, err)
			}
		}
		// Two headers are never one key.
		if _, err := idemhttp.ParseKeyHeader([]string{value, value}); err == nil {
			t.Fatalf("the header %q sent twice was accepted", value)
		}
	})
}
