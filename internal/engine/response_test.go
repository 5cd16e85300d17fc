package engine

import (
	"bytes"
	"encoding/json"
	"strings"
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
		_, b, _, err := encodeResponse(res, errs, 1<<20, false)
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
	if _, _, _, err := encodeResponse(rawJSON(`{"broken"`), nil, 1<<20, false); err == nil {
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
	full, stored, tooLarge, err := encodeResponse(big, nil, 1000, false)
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

// A result the recoverer stored replays exactly as a client's would: the
// mark is for operators only.
func TestRecoveredMarkDoesNotChangeTheReplay(t *testing.T) {
	errs := gqlerror.List{{Message: "order already paid", Path: ast.Path{ast.PathName("pay")},
		Extensions: map[string]any{"code": "ORDER_ALREADY_PAID"}}}
	field := &ast.Field{Alias: "p", Name: "pay"}
	replay := func(recovered bool, res graphql.Marshaler) (string, string, *storedResponse) {
		_, b, _, err := encodeResponse(res, errs, 1<<20, recovered)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeResponse(b)
		if err != nil {
			t.Fatal(err)
		}
		var data bytes.Buffer
		got.marshaler().MarshalGQL(&data)
		e, err := json.Marshal(got.errorsAt(field))
		if err != nil {
			t.Fatal(err)
		}
		return data.String(), string(e), got
	}
	for _, res := range []graphql.Marshaler{rawJSON(`{"id":"7"}`), graphql.Null} {
		clientData, clientErrs, client := replay(false, res)
		recData, recErrs, rec := replay(true, res)
		if !rec.Recovered || client.Recovered {
			t.Fatalf("recovered mark: %v and %v, want true and false", rec.Recovered, client.Recovered)
		}
		// The sentinel a null replays is chosen by Null.
		if recData != clientData || recErrs != clientErrs || rec.Null != client.Null {
			t.Fatalf("recovered replay %s %s, client's %s %s", recData, recErrs, clientData, clientErrs)
		}
	}
	// Too large to store: the note keeps the mark too.
	_, b, _, err := encodeResponse(rawJSON(`{"id":"`+strings.Repeat("x", 200)+`"}`), nil, 100, true)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := decodeResponse(b); err != nil || !got.Recovered || got.TooLarge == 0 {
		t.Fatalf("too large recovered result stored as %s (%v)", b, err)
	}
}

// A result without errors is stored without json.Marshal: the bytes are
// still those json.Marshal would write (HTML characters aside, which it
// escapes and the replay need not), the answer's data is what a replay
// answers, and invalid JSON is refused as before.
func TestStoredResponseWithoutErrorsIsWrittenDirectly(t *testing.T) {
	data := rawJSON(`{"id":"7", "note":"a < b & c", "tags":[ "a" ]}`)
	answer, b, _, err := encodeResponse(data, nil, 1<<20, false)
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	enc := json.NewEncoder(&want)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(storedResponse{Version: 1, Data: json.RawMessage(data)}); err != nil {
		t.Fatal(err)
	}
	if string(b)+"\n" != want.String() {
		t.Errorf("stored %s, json.Marshal writes %s", b, want.String())
	}
	got, err := decodeResponse(b)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Data, answer.Data) {
		t.Errorf("answered %s, a replay answers %s", answer.Data, got.Data)
	}
	if _, _, _, err := encodeResponse(rawJSON(`{"id":`), nil, 1<<20, false); err == nil {
		t.Error("invalid JSON stored")
	}
}
