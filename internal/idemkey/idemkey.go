// Package idemkey is what the hook checks of an idempotency key before any
// database work, and how keys appear in logs.
package idemkey

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/goovo/idem/idemcode"
	"github.com/goovo/idem/internal/record"
)

// Validate checks a key: 1 to record.MaxKeyLength characters of printable
// ASCII. The refusal is IDEMPOTENCY_KEY_INVALID and never quotes a long
// key.
func Validate(key string) error {
	if key == "" {
		return invalid(key, "idempotency key is empty")
	}
	if len(key) > record.MaxKeyLength {
		return invalid("", fmt.Sprintf("idempotency key is %d bytes long; the limit is %d", len(key), record.MaxKeyLength))
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < 0x20 || c > 0x7e {
			return invalid("", fmt.Sprintf("idempotency key has a character that is not printable ASCII at byte %d", i))
		}
	}
	return nil
}

func invalid(key, message string) error {
	return &idemcode.Error{Code: idemcode.KeyInvalid, Key: key, Message: message}
}

// Hash is how keys appear in logs and spans: the first 12 hex digits of
// their SHA-256, enough to correlate log lines without revealing the key.
func Hash(key string) string {
	if key == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:6])
}

// HeaderValue returns key as the Idempotency-Key header's value: a
// structured-field String, quoted, with \ and " escaped
// (idemhttp.FormatKeyHeader, and the recoverer's requests). key must be
// valid (Validate), so that every character is printable ASCII.
func HeaderValue(key string) string {
	var b strings.Builder
	b.Grow(len(key) + 2)
	b.WriteByte('"')
	for i := 0; i < len(key); i++ {
		if c := key[i]; c == '"' || c == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(key[i])
	}
	b.WriteByte('"')
	return b.String()
}
