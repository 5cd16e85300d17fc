package idem

// Text the database cannot store. PostgreSQL refuses a NUL character in
// text and, in a UTF-8 database, bytes that are not UTF-8 (SQLSTATE 22021);
// SQLite stores both. Left to the database, the same argument was a store
// outage on PostgreSQL (IDEMPOTENCY_UNAVAILABLE, retryable, for ever) and
// a success on SQLite. The hook refuses such text before any database
// work, the same way on every backend and every retry: BAD_USER_INPUT,
// final, with nothing stored. What reaches the database anyway (text a
// resolver made itself) is classified where it comes back: the store's
// statements (Extension.unavailable), the resolver's writes (finalError)
// and the presenter (Extension.unstorable).
//
// How such text arrives: a JSON body is decoded by encoding/json, which
// replaces each byte that is not UTF-8 with U+FFFD, so the hook checks the
// body's bytes as they are read (utf8Check); a \u0000 escape, in JSON or
// in a GraphQL string literal, is a NUL; a GraphQL document read from
// anything but JSON (a GET query, an application/graphql body) keeps raw
// bytes in the string literals that have no escapes (gqlparser writes
// U+FFFD for them in the others and in block strings). So both the
// variables and the literals of the operation are checked.

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/goovo/idem/idemcode"
)

// unstorableMessage is what a client is told of text the database cannot
// store, wherever it was found; it never quotes the text.
const unstorableMessage = "text the database cannot store: a NUL character (U+0000) or bytes that are not UTF-8"

// whyUnstorable says what is wrong with s for a client, or "" when every
// backend can store it.
func whyUnstorable(s string) string { return textFlaws(0).of(s).why() }

// textFlaws are what makes text unstorable, as bits: the message names the
// worst, whatever order a map's keys come in, so that a retry is answered
// with the same bytes.
type textFlaws uint8

const (
	flawInvalid textFlaws = 1 << iota // bytes that are not UTF-8
	flawNUL                           // a NUL character
)

func (f textFlaws) of(s string) textFlaws {
	if strings.IndexByte(s, 0) >= 0 {
		f |= flawNUL
	}
	if !utf8.ValidString(s) {
		f |= flawInvalid
	}
	return f
}

func (f textFlaws) why() string {
	switch {
	case f&flawNUL != 0:
		return "a NUL character (U+0000), which the database cannot store"
	case f&flawInvalid != 0:
		return "bytes that are not UTF-8"
	}
	return ""
}

// unstorableArguments refuses an operation whose variables or literal
// arguments hold text the database cannot store (BAD_USER_INPUT), or
// returns nil. It is linear in the operation's document and variables.
func unstorableArguments(oc *graphql.OperationContext) *gqlerror.Error {
	var flawed []string
	for name, v := range oc.Variables {
		if valueFlaws(v) != 0 {
			flawed = append(flawed, name)
		}
	}
	if len(flawed) > 0 {
		// The first by name: the same refusal on every retry.
		name := slices.Min(flawed)
		return refuseText(fmt.Sprintf("variable $%s holds %s", name, valueFlaws(oc.Variables[name]).why()), nil)
	}
	if oc.Operation == nil {
		return nil
	}
	w := literalWalker{}
	for _, v := range oc.Operation.VariableDefinitions {
		w.defaultValue(v)
	}
	w.directives(oc.Operation.Directives)
	w.selections(oc.Operation.SelectionSet)
	// Every fragment once: validation refused the ones the operation does
	// not use.
	for _, f := range oc.Doc.Fragments {
		w.directives(f.Directives)
		w.selections(f.SelectionSet)
	}
	return w.found
}

// valueFlaws walks a variable's value as gqlgen decoded it (JSON: maps,
// lists, strings, numbers), keys included.
func valueFlaws(v any) textFlaws {
	var f textFlaws
	switch v := v.(type) {
	case string:
		f = f.of(v)
	case []any:
		for _, e := range v {
			f |= valueFlaws(e)
		}
	case map[string]any:
		for k, e := range v {
			f = f.of(k) | valueFlaws(e)
		}
	}
	return f
}

// literalWalker finds the first string literal of a document that holds
// unstorable text. It builds a message only for that one: the walk runs
// for every operation.
type literalWalker struct{ found *gqlerror.Error }

func (w *literalWalker) selections(set ast.SelectionSet) {
	for _, sel := range set {
		if w.found != nil {
			return
		}
		switch sel := sel.(type) {
		case *ast.Field:
			for _, a := range sel.Arguments {
				w.argument(a, sel.Name)
			}
			w.directives(sel.Directives)
			w.selections(sel.SelectionSet)
		case *ast.InlineFragment:
			w.directives(sel.Directives)
			w.selections(sel.SelectionSet)
		case *ast.FragmentSpread:
			w.directives(sel.Directives)
		}
	}
}

func (w *literalWalker) directives(ds ast.DirectiveList) {
	for _, d := range ds {
		for _, a := range d.Arguments {
			w.argument(a, "@"+d.Name)
		}
	}
}

func (w *literalWalker) argument(a *ast.Argument, of string) {
	if w.found == nil {
		if v := flawedLiteral(a.Value); v != nil {
			w.found = refuseText("the argument "+a.Name+" of "+of+" holds "+whyUnstorable(v.Raw), v.Position)
		}
	}
}

func (w *literalWalker) defaultValue(d *ast.VariableDefinition) {
	if w.found == nil {
		if v := flawedLiteral(d.DefaultValue); v != nil {
			w.found = refuseText("the default value of $"+d.Variable+" holds "+whyUnstorable(v.Raw), v.Position)
		}
	}
}

// flawedLiteral returns the first string literal in v (v, or nested in a
// list or an input object) that holds unstorable text, or nil.
func flawedLiteral(v *ast.Value) *ast.Value {
	if v == nil {
		return nil
	}
	switch v.Kind {
	case ast.StringValue, ast.BlockValue:
		if whyUnstorable(v.Raw) != "" {
			return v
		}
	case ast.ListValue, ast.ObjectValue:
		for _, c := range v.Children {
			if f := flawedLiteral(c.Value); f != nil {
				return f
			}
		}
	}
	return nil
}

func refuseText(message string, pos *ast.Position) *gqlerror.Error {
	e := &gqlerror.Error{Message: message, Extensions: map[string]any{"code": string(idemcode.BadUserInput)}}
	if pos != nil {
		e.Locations = []gqlerror.Location{{Line: pos.Line, Column: pos.Column}}
	}
	return e
}

// isJSON reports a request body of JSON, the one whose decoding hides bytes
// that are not UTF-8 (utf8Check).
func isJSON(r *http.Request) bool {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

// utf8Check reads a request body and notes whether its bytes are UTF-8,
// as they stream past, keeping only the bytes of a character split between
// two reads. encoding/json replaces each byte that is not UTF-8 with
// U+FFFD: the client's text would be changed, not refused.
type utf8Check struct {
	io.ReadCloser
	partial []byte // the start of a character the last read split
	invalid bool
}

func (c *utf8Check) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	if !c.invalid {
		c.scan(p[:n], err != nil)
	}
	return n, err
}

// scan checks b, which follows what was scanned before; end says no bytes
// follow it.
func (c *utf8Check) scan(b []byte, end bool) {
	// Complete the character the last read split, a byte at a time: a
	// byte that cannot continue it makes it whole, and invalid.
	for len(c.partial) > 0 && len(b) > 0 {
		c.partial = append(c.partial, b[0])
		b = b[1:]
		if utf8.FullRune(c.partial) {
			if r, size := utf8.DecodeRune(c.partial); r == utf8.RuneError && size <= 1 {
				c.invalid = true
				return
			}
			c.partial = c.partial[:0]
		}
	}
	// A character split at the end of b waits for the next read.
	cut := len(b)
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax+1; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				cut = i
			}
			break
		}
	}
	if !utf8.Valid(b[:cut]) {
		c.invalid = true
		return
	}
	c.partial = append(c.partial, b[cut:]...)
	if end && len(c.partial) > 0 {
		c.invalid = true
	}
}

// refuseInvalidBody is the refusal of an operation whose JSON body was not
// UTF-8, or nil.
func refuseInvalidBody(st *httpState) *gqlerror.Error {
	if st == nil || st.body == nil || !st.body.invalid {
		return nil
	}
	return refuseText("the request body holds bytes that are not UTF-8 (JSON must be UTF-8); they would be stored as U+FFFD", nil)
}

// unstorable answers an error whose cause is the database's refusal of
// text it cannot store (a resolver's write of text it made itself):
// BAD_USER_INPUT, final, without the database's words, which the log gets
// at level Info (it is no outage).
func (e *Extension) unstorable(ctx context.Context, g *gqlerror.Error) *gqlerror.Error {
	e.cfg.Logger.LogAttrs(ctx, slog.LevelInfo, "the database refused text it cannot store; the client got BAD_USER_INPUT",
		slog.String("path", g.Path.String()), slog.Any("error", g.Err))
	return &gqlerror.Error{
		Message:    "the input holds " + unstorableMessage,
		Path:       g.Path,
		Locations:  g.Locations,
		Extensions: map[string]any{"code": string(idemcode.BadUserInput)},
	}
}
