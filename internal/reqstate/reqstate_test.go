package reqstate

import (
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"unicode/utf8"
)

// A JSON body is checked for UTF-8 as it streams past, in reads of any
// size: a character split between two reads is judged whole, and one cut
// off by the end of the body is not UTF-8.
func TestBodyUTF8CheckAcrossReads(t *testing.T) {
	bodies := []string{
		`{"p":"/café"}`, `{"p":"日本語 😀"}`, "", "ascii only",
		"caf\xe9", "\xff", "\xc3", "a\xe2\x82", "\xe2\x82\xac\xe2\x82", "a\xf0\x9f\x98", "\xed\xa0\x80", // a surrogate
		"\xc0\xaf", "\xe2\x82(", `{"p":"` + "\xc3" + `"}`,
	}
	for _, body := range bodies {
		want := !utf8.ValidString(body)
		for size := 1; size <= max(1, len(body)); size++ {
			c := &UTF8Check{ReadCloser: io.NopCloser(chunked(body, size))}
			if _, err := io.ReadAll(c); err != nil {
				t.Fatal(err)
			}
			if c.Invalid() != want {
				t.Errorf("%q in reads of %d bytes: invalid %v, want %v", body, size, c.Invalid(), want)
			}
		}
	}
}

// chunked reads s in reads of at most size bytes (HalfReader makes many
// of them shorter still), io.EOF in a read of its own.
func chunked(s string, size int) io.Reader {
	return iotest.HalfReader(&sizedReader{r: strings.NewReader(s), size: size})
}

type sizedReader struct {
	r    io.Reader
	size int
}

func (s *sizedReader) Read(p []byte) (int, error) { return s.r.Read(p[:min(len(p), s.size)]) }
