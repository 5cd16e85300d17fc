package idem_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/goovo/idem"
	"github.com/goovo/idem/idemcode"
)

// validKey is the rule ValidateKey implements, written independently:
// 1 to 255 bytes, each printable ASCII (0x20..0x7e).
func validKey(key string) bool {
	if len(key) < 1 || len(key) > 255 {
		return false
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x20 || key[i] > 0x7e {
			return false
		}
	}
	return true
}

// checkValidateKey asserts the contract of idem.ValidateKey for key.
func checkValidateKey(t *testing.T, key string) {
	t.Helper()
	err := idem.ValidateKey(key)
	if want := validKey(key); (err == nil) != want {
		t.Fatalf("ValidateKey(%q) = %v, want valid=%v", key, err, want)
	}
	if err == nil {
		return
	}
	if !errors.Is(err, idem.ErrKeyInvalid) {
		t.Errorf("ValidateKey(%q) = %v, not errors.Is ErrKeyInvalid", key, err)
	}
	if len(key) > idem.MaxKeyLength {
		// An over-long key is not echoed back to the client.
		if strings.Contains(err.Error(), key) {
			t.Errorf("error message of ValidateKey contains the %d-byte key", len(key))
		}
		var e *idemcode.Error
		if errors.As(err, &e) && strings.Contains(e.Key, key) {
			t.Errorf("Error.Key of ValidateKey holds the %d-byte key", len(key))
		}
	}
}

func TestValidateKey(t *testing.T) {
	tests := []struct {
		name  string
		key   string
		valid bool
	}{
		{"empty", "", false},
		{"one character", "a", true},
		{"single space", " ", true},
		{"tilde (0x7e)", "~", true},
		{"UUID", "3f2c1d6e-8a4b-4c1e-9f0a-2b7d5e6c8a91", true},
		{"with spaces", "order 42 for customer 7", true},
		{"all printable ASCII", printableASCII(), true},
		{"255 characters", strings.Repeat("k", 255), true},
		{"256 characters", strings.Repeat("k", 256), false},
		{"very long", strings.Repeat("x", 100_000), false},
		{"NUL", "\x00", false},
		{"NUL inside", "abc\x00def", false},
		{"newline", "\n", false},
		{"trailing newline", "key\n", false},
		{"tab", "a\tb", false},
		{"unit separator (0x1f)", "\x1f", false},
		{"DEL (0x7f)", "\x7f", false},
		{"é (UTF-8)", "é", false},
		{"é inside", "caf\u00e9-1", false},
		{"invalid UTF-8", "\xff", false},
		{"254 characters and é", strings.Repeat("k", 253) + "é", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := validKey(tt.key); got != tt.valid {
				t.Fatalf("test table is wrong for %q: reference rule says %v", tt.key, got)
			}
			err := idem.ValidateKey(tt.key)
			if (err == nil) != tt.valid {
				t.Fatalf("ValidateKey(%q) = %v, want valid=%v", tt.key, err, tt.valid)
			}
			checkValidateKey(t, tt.key)
		})
	}
}

func printableASCII() string {
	var b strings.Builder
	for c := byte(0x20); c <= 0x7e; c++ {
		b.WriteByte(c)
	}
	return b.String()
}

func FuzzValidateKey(f *testing.F) {
	for _, s := range []string{
		"", "a", " ", "~", "\x00", "\n", "\x1f", "\x7f", "é", "\xff",
		"3f2c1d6e-8a4b-4c1e-9f0a-2b7d5e6c8a91", "order 42 for customer 7",
		strings.Repeat("k", 255), strings.Repeat("k", 256), strings.Repeat("k", 254) + "\x7f",
	} {
		f.Add(s)
	}
	f.Fuzz(checkValidateKey)
}
