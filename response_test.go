package idem

import (
	"bytes"
	"testing"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
)

func TestStoredResponseKeepsBytesAndSentinels(t *testing.T) {
	data := rawJSON(`{"id":"7","amount":12,"tags":["a","b"]}`)
	for name, res := range map[string]graphql.Marshaler{
		"data":          data,
		"null":          graphql.Null,
		"required null": graphql.RequiredNull,
	} {
		errs := gqlerror.List{{Message: "amount must be positive", Path: ast.Path{ast.PathName("pay"), ast.PathIndex(0), ast.PathName("x")},
			Extensions: map[string]any{"code": "BAD_USER_INPUT"}}}
		_, b, _, err := encodeResponse(res, errs, 1<<20)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, err := decodeResponse(b)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		m := got.marshaler()
		if res == graphql.Null || res == graphql.RequiredNull {
			if m != res {
				t.Errorf("%s: replayed %v, want the same sentinel", name, m)
			}
		} else {
			var buf bytes.Buffer
			m.MarshalGQL(&buf)
			if buf.String() != string(data) {
				t.Errorf("%s: replayed %s, want %s", name, buf.String(), data)
			}
		}
		replayed := got.errorsAt(&ast.Field{Alias: "p2", Name: "pay"})
		if len(replayed) != 1 || replayed[0].Message != "amount must be positive" || replayed[0].Extensions["code"] != "BAD_USER_INPUT" {
			t.Fatalf("%s: errors %+v", name, replayed)
		}
		if p := replayed[0].Path.String(); p != "p2[0].x" {
			t.Errorf("%s: path %s, want p2[0].x (rebased on the new alias)", name, p)
		}
		if errs[0].Path[0] != ast.PathName("pay") {
			t.Errorf("%s: errorsAt changed the stored error", name)
		}
	}
}

func TestEncodeRejectsInvalidJSON(t *testing.T) {
	if _, _, _, err := encodeResponse(rawJSON(`{"broken"`), nil, 1<<20); err == nil {
		t.Fatal("invalid field bytes were stored")
	}
}

func TestDecodeRejectsUnknownVersion(t *testing.T) {
	if _, err := decodeResponse([]byte(`{"v":2,"data":{}}`)); err == nil {
		t.Fatal("unknown version decoded")
	}
}

func TestOversizedResponseIsANote(t *testing.T) {
	big := rawJSON(`"` + string(bytes.Repeat([]byte("x"), 2000)) + `"`)
	full, stored, tooLarge, err := encodeResponse(big, nil, 1000)
	if err != nil || tooLarge < 2000 {
		t.Fatal(tooLarge, err)
	}
	var buf bytes.Buffer
	full.marshaler().MarshalGQL(&buf)
	if buf.String() != string(big) {
		t.Fatal("the client did not get the full result")
	}
	note, err := decodeResponse(stored)
	if err != nil || note.TooLarge < 2000 || note.Data != nil || len(stored) > 100 {
		t.Fatalf("stored %s: %+v %v", stored, note, err)
	}
}
