package document

// Text the database cannot store. PostgreSQL refuses a NUL character in
// text and, in a UTF-8 database, bytes that are not UTF-8 (SQLSTATE 22021);
// SQLite stores both. Left to the database, the same argument was a store
// outage on PostgreSQL (IDEMPOTENCY_UNAVAILABLE, retryable, for ever) and
// a success on SQLite. The hook refuses such text before any database
// work, the same way on every backend and every retry: BAD_USER_INPUT,
// final, with nothing stored. What reaches the database anyway (text a
// resolver made itself) is classified where it comes back: the store's
// statements (the engine's unavailable), the resolver's writes (the
// engine's finalError) and the presenter (idemhttp.Presenter).
//
// How such text arrives: a JSON body is decoded by encoding/json, which
// replaces each byte that is not UTF-8 with U+FFFD, so the hook checks the
// body's bytes as they are read (reqstate.UTF8Check); a \u0000 escape, in JSON or
// in a GraphQL string literal, is a NUL; a GraphQL document read from
// anything but JSON (a GET query, an application/graphql body) keeps raw
// bytes in the string literals that have no escapes (gqlparser writes
// U+FFFD for them in the others and in block strings). So both the
// variables and the literals of the operation are checked.

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/goovo/idem/idemcode"
)

// UnstorableMessage is what a client is told of text the database cannot
// store, wherever it was found; it never quotes the text.
const UnstorableMessage = "text the database cannot store: a NUL character (U+0000) or bytes that are not UTF-8"

// Why says what is wrong with s for a client, or "" when every
// backend can store it.
func Why(s string) string { return textFlaws(0).of(s).why() }

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

// Arguments refuses an operation whose variables or literal
// arguments hold text the database cannot store (BAD_USER_INPUT), or
// returns nil. It is linear in the operation's document and variables.
func Arguments(oc *graphql.OperationContext) *gqlerror.Error {
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
			w.found = refuseText("the argument "+a.Name+" of "+of+" holds "+Why(v.Raw), v.Position)
		}
	}
}

func (w *literalWalker) defaultValue(d *ast.VariableDefinition) {
	if w.found == nil {
		if v := flawedLiteral(d.DefaultValue); v != nil {
			w.found = refuseText("the default value of $"+d.Variable+" holds "+Why(v.Raw), v.Position)
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
		if Why(v.Raw) != "" {
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

// BodyNotUTF8 is the refusal of an operation whose JSON body was not UTF-8
// (reqstate.UTF8Check).
func BodyNotUTF8() *gqlerror.Error {
	return refuseText("the request body holds bytes that are not UTF-8 (JSON must be UTF-8); they would be stored as U+FFFD", nil)
}
