package idem

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
)

// storedResponse is what a record keeps of a finished attempt: the bytes the
// field marshalled to (or which null sentinel it returned, since gqlgen
// propagates nulls by the sentinel's identity) and the field's errors.
type storedResponse struct {
	Version int             `json:"v"`
	Null    string          `json:"null,omitempty"`
	Data    json.RawMessage `json:"data,omitempty"`
	Errors  gqlerror.List   `json:"errors,omitempty"`
	// TooLarge, in place of the above, records that the result (of that
	// many bytes) exceeded Config.MaxResponseBytes and was not stored.
	TooLarge int `json:"tooLarge,omitempty"`
}

const (
	nullPlain    = "null"
	nullRequired = "required"
)

// encodeResponse captures a field's result for storage: the response the
// client gets, and the bytes the record keeps, which are only a note when
// the response (of tooLarge bytes) exceeds limit.
func encodeResponse(res graphql.Marshaler, errs gqlerror.List, limit int) (answer *storedResponse, stored []byte, tooLarge int, err error) {
	r := storedResponse{Version: 1, Errors: errs}
	switch res {
	case nil, graphql.Null:
		r.Null = nullPlain
	case graphql.RequiredNull:
		r.Null = nullRequired
	default:
		var buf bytes.Buffer
		res.MarshalGQL(&buf)
		if !json.Valid(buf.Bytes()) {
			return nil, nil, 0, fmt.Errorf("field result is not valid JSON (%d bytes)", buf.Len())
		}
		r.Data = buf.Bytes()
	}
	b, err := json.Marshal(r)
	if err != nil {
		return nil, nil, 0, err
	}
	if len(b) > limit {
		tooLarge = len(b)
		b, err = json.Marshal(storedResponse{Version: 1, TooLarge: tooLarge})
	}
	return &r, b, tooLarge, err
}

func decodeResponse(b []byte) (*storedResponse, error) {
	var r storedResponse
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, err
	}
	if r.Version != 1 {
		return nil, fmt.Errorf("unknown stored response version %d", r.Version)
	}
	return &r, nil
}

// marshaler returns what the root field resolves to: the stored bytes as
// they are, or the very sentinel the first execution returned.
func (r *storedResponse) marshaler() graphql.Marshaler {
	switch r.Null {
	case nullPlain:
		return graphql.Null
	case nullRequired:
		return graphql.RequiredNull
	}
	return rawJSON(r.Data)
}

// errorsAt returns the stored errors with their paths rebased onto the
// response name the field has in this request (a retry may alias it).
func (r *storedResponse) errorsAt(alias string) gqlerror.List {
	out := make(gqlerror.List, 0, len(r.Errors))
	for _, e := range r.Errors {
		cp := *e
		if len(cp.Path) > 0 {
			if _, ok := cp.Path[0].(ast.PathName); ok {
				cp.Path = append(ast.Path{ast.PathName(alias)}, cp.Path[1:]...)
			}
		}
		out = append(out, &cp)
	}
	return out
}

type rawJSON []byte

func (r rawJSON) MarshalGQL(w io.Writer) { _, _ = w.Write(r) }
