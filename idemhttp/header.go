package idemhttp

import (
	"strings"

	"github.com/goovo/idem/idemcode"
	"github.com/goovo/idem/internal/idemkey"
	"github.com/goovo/idem/internal/refusal"
)

// The Idempotency-Key header, as the IETF draft defines it
// (draft-ietf-httpapi-idempotency-key-header-07): an Item Structured Header
// whose value is a String (RFC 8941 / RFC 9651, section 3.3.3), so
//
//	Idempotency-Key: "8e03978e-40d5-43e8-bc93-6894a57f9324"
//
// with the quotes not part of the key. Stripe's bare form,
//
//	Idempotency-Key: 8e03978e-40d5-43e8-bc93-6894a57f9324
//
// is accepted too: a key that starts with a digit is not an sf-token, so
// the bare form cannot be read as structured-field syntax, and is read as the
// key itself. The parser is written here rather than taken from an RFC 8941
// library (github.com/dunglas/httpsfv exists): it would cover only the
// quoted String, twenty lines, and the bare form would still be ours.

// ParseKeyHeader reads the Idempotency-Key header from its values as
// net/http gives them (r.Header.Values(idemcode.HeaderKey)). It accepts one header
// that holds one structured-field String ("abc", with \" and \\ escapes) or
// one bare key (abc: no quotes, commas, semicolons or spaces), and returns
// the key, checked as idem.ValidateKey checks it. A list (a, b),
// parameters ("a";x=1), the header sent twice or bad quoting are refused
// with an *idemcode.Error of code idemcode.KeyInvalid.
func ParseKeyHeader(values []string) (string, error) {
	key, _, err := parseKeyHeader(values)
	return key, err
}

// FormatKeyHeader returns key as the draft's Idempotency-Key value: a
// structured-field String, quoted, with \ and " escaped. key must be valid
// (idem.ValidateKey), so that every character is printable ASCII.
func FormatKeyHeader(key string) string { return idemkey.HeaderValue(key) }

// parseKeyHeader is ParseKeyHeader, and reports whether the key was quoted,
// so that the response can echo it in the client's own form.
func parseKeyHeader(values []string) (key string, quoted bool, err error) {
	refuse := func(format string, args ...any) (string, bool, error) {
		return "", false, refusal.Errorf(idemcode.KeyInvalid, "", "the %s header "+format, append([]any{idemcode.HeaderKey}, args...)...)
	}
	switch len(values) {
	case 0:
		return refuse("is missing")
	case 1:
	default:
		return refuse("was sent %d times; send it once, with one key", len(values))
	}
	v := strings.Trim(values[0], " \t")
	if v == "" {
		return refuse("is empty")
	}
	if v[0] != '"' {
		// The bare form: the whole value is the key.
		if i := strings.IndexAny(v, ",;\" \t"); i >= 0 {
			return refuse("%s", whatIs(v[i], true))
		}
		if err := idemkey.Validate(v); err != nil {
			return "", false, err
		}
		return v, false, nil
	}
	var b strings.Builder
	for i := 1; i < len(v); i++ {
		switch c := v[i]; {
		case c == '\\':
			if i+1 == len(v) || (v[i+1] != '"' && v[i+1] != '\\') {
				return refuse("has a backslash that escapes neither \" nor \\ at byte %d", i)
			}
			i++
			b.WriteByte(v[i])
		case c == '"':
			if rest := strings.TrimLeft(v[i+1:], " \t"); rest != "" {
				return refuse("%s", whatIs(rest[0], false))
			}
			key = b.String()
			if err := idemkey.Validate(key); err != nil {
				return "", false, err
			}
			return key, true, nil
		case c < 0x20 || c > 0x7e:
			return refuse("has a character that is not printable ASCII at byte %d", i)
		default:
			b.WriteByte(c)
		}
	}
	return refuse("has no closing quote")
}

// whatIs says what a character announces in the header, and what to send
// instead.
func whatIs(c byte, bare bool) string {
	switch {
	case c == ',':
		return "is a list; send one key"
	case c == ';':
		return "has parameters; send the key alone"
	case bare && c == '"':
		return "has a quote inside a bare key; send the key as a quoted string, with \\\" for its quotes"
	case bare:
		return "has a space inside a bare key; send the key as a quoted string, such as \"a b\""
	}
	return "has text after the quoted key; send the key alone"
}
