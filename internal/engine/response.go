package engine

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
	// Recovered records that the recoverer ran the attempt, not a client
	// (idemctl recovered lists these). Only operators read it: a replay
	// answers exactly what a client-run attempt's would.
	Recovered bool `json:"recovered,omitempty"`
}

// storedPrefix begins the stored form of a storedResponse with data and
// nothing else (encodeResponse writes it without json.Marshal).
const storedPrefix = `{"v":1,"data":`

const (
	nullPlain    = "null"
	nullRequired = "required"
)

// encodeResponse captures a field's result for storage: the response the
// client gets, and the bytes the record keeps, which are only a note when
// the response (of tooLarge bytes) exceeds limit. recovered marks an
// attempt the recoverer ran.
func encodeResponse(res graphql.Marshaler, errs gqlerror.List, limit int, recovered bool) (answer *storedResponse, stored []byte, tooLarge int, err error) {
	r := storedResponse{Version: 1, Errors: errs, Recovered: recovered}
	var b []byte
	switch res {
	case nil, graphql.Null:
		r.Null = nullPlain
	case graphql.RequiredNull:
		r.Null = nullRequired
	default:
		var buf bytes.Buffer
		res.MarshalGQL(&buf)
		if len(errs) == 0 && !recovered {
			// The common case, written directly: the field's bytes are
			// scanned once (json.Compact checks them as it copies), where
			// json.Valid and json.Marshal of a RawMessage scanned them
			// twice more. The bytes are those json.Marshal writes.
			out := bytes.NewBuffer(make([]byte, 0, buf.Len()+len(storedPrefix)+1))
			out.WriteString(storedPrefix)
			if err := json.Compact(out, buf.Bytes()); err != nil {
				return nil, nil, 0, fmt.Errorf("field result is not valid JSON (%d bytes)", buf.Len())
			}
			out.WriteByte('}')
			b = out.Bytes()
			r.Data = b[len(storedPrefix) : len(b)-1]
			break
		}
		if !json.Valid(buf.Bytes()) {
			return nil, nil, 0, fmt.Errorf("field result is not valid JSON (%d bytes)", buf.Len())
		}
		r.Data = buf.Bytes()
	}
	if b == nil {
		var err error
		if b, err = json.Marshal(r); err != nil {
			return nil, nil, 0, err
		}
	}
	if len(b) > limit {
		tooLarge = len(b)
		b, err = json.Marshal(storedResponse{Version: 1, TooLarge: tooLarge, Recovered: recovered})
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

// ReadResponse reads a record's stored response as operators see it
// (idemctl): the field's data bytes (null for a null result), its errors,
// and whether the recoverer ran the attempt.
func ReadResponse(b []byte) (data json.RawMessage, errs gqlerror.List, recovered bool, err error) {
	r, err := decodeResponse(b)
	if err != nil {
		return nil, nil, false, err
	}
	data = r.Data
	if r.Null != "" {
		data = json.RawMessage("null")
	}
	return data, r.Errors, r.Recovered, nil
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

// errorsAt returns the stored errors placed in this request: their paths
// rebased onto the response name the field has here (a retry may alias
// it), and their locations onto the positions of the fields they name in
// this request's document, which may be laid out differently from the
// first one. A location that cannot be placed is dropped.
func (r *storedResponse) errorsAt(field *ast.Field) gqlerror.List {
	out := make(gqlerror.List, 0, len(r.Errors))
	for _, e := range r.Errors {
		cp := *e
		cp.Locations = nil
		if len(cp.Path) > 0 {
			if _, ok := cp.Path[0].(ast.PathName); ok {
				cp.Path = append(ast.Path{ast.PathName(field.Alias)}, cp.Path[1:]...)
				if f := fieldAt(field, cp.Path[1:]); f != nil && f.Position != nil {
					cp.Locations = []gqlerror.Location{{Line: f.Position.Line, Column: f.Position.Column}}
				}
			}
		}
		out = append(out, &cp)
	}
	return out
}

// fieldAt finds the field a response path below field names: each name is
// a response name in the selection set (fragments included) of the field
// before it; list indexes stay on the same field. The fingerprint makes a
// replay's selection set the stored one's, so the path is found.
func fieldAt(field *ast.Field, path ast.Path) *ast.Field {
	for _, el := range path {
		name, ok := el.(ast.PathName)
		if !ok {
			continue
		}
		if field = selected(field.SelectionSet, string(name)); field == nil {
			return nil
		}
	}
	return field
}

// selected returns the field of set whose response name is name.
func selected(set ast.SelectionSet, name string) *ast.Field {
	for _, sel := range set {
		var inner ast.SelectionSet
		switch sel := sel.(type) {
		case *ast.Field:
			if sel.Alias == name {
				return sel
			}
			continue
		case *ast.InlineFragment:
			inner = sel.SelectionSet
		case *ast.FragmentSpread:
			if sel.Definition == nil {
				continue
			}
			inner = sel.Definition.SelectionSet
		}
		if f := selected(inner, name); f != nil {
			return f
		}
	}
	return nil
}

type rawJSON []byte

func (r rawJSON) MarshalGQL(w io.Writer) { _, _ = w.Write(r) }
