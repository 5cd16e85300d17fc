// Package fingerprint computes what a retry must match: a hash of the root
// field, its arguments in canonical form and its selection set.
//
// Canonical means that requests asking for the same thing hash equal however
// they are written: literal or variable, argument order, input-object field
// order, an omitted argument or input field and its default value, 1 and
// 1.0 for a Float, "5" and 5 for an ID. The selection set is printed with
// fragments expanded, @skip/@include applied and aliases kept (the stored
// response bytes depend on them).
package fingerprint

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/vektah/gqlparser/v2/ast"
)

const version = "v1"

// Fingerprint identifies what a request asks for.
type Fingerprint struct {
	// Field is "<Type>.<field>", in clear, so that a mismatch can be named.
	Field string
	// Arguments and Selection are truncated SHA-256 hashes, in hex.
	Arguments string
	Selection string
}

// String encodes f for storage.
func (f Fingerprint) String() string {
	return version + ":" + f.Field + ":" + f.Arguments + ":" + f.Selection
}

// Parse decodes a stored fingerprint.
func Parse(s string) (Fingerprint, bool) {
	parts := strings.Split(s, ":")
	if len(parts) != 4 || parts[0] != version {
		return Fingerprint{}, false
	}
	return Fingerprint{Field: parts[1], Arguments: parts[2], Selection: parts[3]}, true
}

// Differences names what differs between two fingerprints, for the message
// of IDEMPOTENCY_KEY_REUSED; empty when they are equal.
func Differences(stored, got string) []string {
	if stored == got {
		return nil
	}
	a, okA := Parse(stored)
	b, okB := Parse(got)
	if !okA || !okB {
		return []string{"request"}
	}
	var diffs []string
	if a.Field != b.Field {
		diffs = append(diffs, fmt.Sprintf("mutation (first used for %s)", a.Field))
	}
	if a.Arguments != b.Arguments {
		diffs = append(diffs, "arguments")
	}
	if a.Selection != b.Selection {
		diffs = append(diffs, "selection set")
	}
	return diffs
}

// Of returns the fingerprint of field, a field of the root type typeName,
// leaving out the argument named skipArg (the idempotency key).
func Of(schema *ast.Schema, typeName string, field *ast.Field, vars map[string]any, skipArg string) Fingerprint {
	var args, sel bytes.Buffer
	c := canon{schema: schema, vars: vars}
	var defs ast.ArgumentDefinitionList
	if field.Definition != nil {
		defs = field.Definition.Arguments
	}
	c.arguments(&args, defs, field.Arguments, skipArg)
	c.selectionSet(&sel, field.SelectionSet)
	return Fingerprint{Field: typeName + "." + field.Name, Arguments: digest(args.Bytes()), Selection: digest(sel.Bytes())}
}

// CanonicalArguments returns the canonical text of field's arguments, for
// tests and debugging.
func CanonicalArguments(schema *ast.Schema, field *ast.Field, vars map[string]any, skipArg string) string {
	var b bytes.Buffer
	var defs ast.ArgumentDefinitionList
	if field.Definition != nil {
		defs = field.Definition.Arguments
	}
	canon{schema: schema, vars: vars}.arguments(&b, defs, field.Arguments, skipArg)
	return b.String()
}

// CanonicalSelection returns the canonical text of a selection set.
func CanonicalSelection(schema *ast.Schema, set ast.SelectionSet, vars map[string]any) string {
	var b bytes.Buffer
	canon{schema: schema, vars: vars}.selectionSet(&b, set)
	return b.String()
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

type canon struct {
	schema *ast.Schema
	vars   map[string]any
}

// arguments writes the arguments sorted by name, each with the value given
// or, when it is absent, its default; absent arguments without a default are
// left out (GraphQL tells them apart from an explicit null).
func (c canon) arguments(b *bytes.Buffer, defs ast.ArgumentDefinitionList, args ast.ArgumentList, skip string) {
	type arg struct {
		name string
		typ  *ast.Type
		val  any
	}
	var list []arg
	seen := map[string]bool{}
	for _, d := range defs {
		seen[d.Name] = true
		if d.Name == skip {
			continue
		}
		if a := args.ForName(d.Name); a != nil && !c.unset(a.Value) {
			list = append(list, arg{d.Name, d.Type, c.value(a.Value)})
		} else if d.DefaultValue != nil {
			list = append(list, arg{d.Name, d.Type, c.value(d.DefaultValue)})
		}
	}
	// Arguments the schema does not declare cannot pass validation; they are
	// still hashed, so that nothing a request says is ignored.
	for _, a := range args {
		if !seen[a.Name] && a.Name != skip {
			list = append(list, arg{a.Name, nil, c.value(a.Value)})
		}
	}
	slices.SortFunc(list, func(x, y arg) int { return strings.Compare(x.name, y.name) })
	b.WriteByte('(')
	for i, a := range list {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(a.name)
		b.WriteByte(':')
		c.typed(b, a.typ, a.val)
	}
	b.WriteByte(')')
}

// unset reports whether v is a variable the request did not provide and that
// has no default: the argument counts as absent.
func (c canon) unset(v *ast.Value) bool {
	if v == nil || v.Kind != ast.Variable {
		return false
	}
	if _, ok := c.vars[v.Raw]; ok {
		return false
	}
	return v.VariableDefinition == nil || v.VariableDefinition.DefaultValue == nil
}

func (c canon) value(v *ast.Value) any {
	val, err := v.Value(c.vars)
	if err != nil {
		// Validation rejects such literals before execution; hash the text.
		return v.Raw
	}
	return val
}

// typed writes v coerced to the input type t (nil when unknown).
func (c canon) typed(b *bytes.Buffer, t *ast.Type, v any) {
	if v == nil {
		b.WriteString("null")
		return
	}
	if t == nil {
		c.generic(b, v)
		return
	}
	if t.Elem != nil {
		list, ok := v.([]any)
		if !ok {
			// Input coercion: a single value where a list is expected is a
			// list of one.
			list = []any{v}
		}
		b.WriteByte('[')
		for i, e := range list {
			if i > 0 {
				b.WriteByte(',')
			}
			c.typed(b, t.Elem, e)
		}
		b.WriteByte(']')
		return
	}
	def := c.schema.Types[t.NamedType]
	if def == nil {
		c.generic(b, v)
		return
	}
	switch def.Kind {
	case ast.InputObject:
		m, ok := v.(map[string]any)
		if !ok {
			c.generic(b, v)
			return
		}
		c.inputObject(b, def, m)
	case ast.Enum:
		c.generic(b, v)
	default:
		c.scalar(b, def.Name, v)
	}
}

func (c canon) inputObject(b *bytes.Buffer, def *ast.Definition, m map[string]any) {
	type entry struct {
		name string
		typ  *ast.Type
		val  any
	}
	var list []entry
	for _, f := range def.Fields {
		if v, ok := m[f.Name]; ok {
			list = append(list, entry{f.Name, f.Type, v})
		} else if f.DefaultValue != nil {
			list = append(list, entry{f.Name, f.Type, c.value(f.DefaultValue)})
		}
	}
	for name, v := range m {
		if def.Fields.ForName(name) == nil {
			list = append(list, entry{name, nil, v})
		}
	}
	slices.SortFunc(list, func(x, y entry) int { return strings.Compare(x.name, y.name) })
	b.WriteByte('{')
	for i, e := range list {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Quote(e.name))
		b.WriteByte(':')
		c.typed(b, e.typ, e.val)
	}
	b.WriteByte('}')
}

func (c canon) scalar(b *bytes.Buffer, name string, v any) {
	switch name {
	case "ID":
		// An ID may be sent as a string or an integer; it means the same.
		if n, ok := number(v); ok {
			b.WriteString(strconv.Quote(n))
			return
		}
	case "Int", "Float":
		if n, ok := number(v); ok {
			b.WriteString(n)
			return
		}
	}
	c.generic(b, v)
}

// number returns the canonical text of a numeric value: integers without a
// fraction, other numbers in the shortest form that round-trips.
func number(v any) (string, bool) {
	switch n := v.(type) {
	case int:
		return strconv.FormatInt(int64(n), 10), true
	case int32:
		return strconv.FormatInt(int64(n), 10), true
	case int64:
		return strconv.FormatInt(n, 10), true
	case uint64:
		return strconv.FormatUint(n, 10), true
	case float64:
		return formatFloat(n), true
	case json.Number:
		if i, err := strconv.ParseInt(string(n), 10, 64); err == nil {
			return strconv.FormatInt(i, 10), true
		}
		if f, err := strconv.ParseFloat(string(n), 64); err == nil {
			return formatFloat(f), true
		}
		return string(n), true
	case string:
		if _, err := strconv.ParseInt(n, 10, 64); err == nil {
			return n, true
		}
	}
	return "", false
}

func formatFloat(f float64) string {
	if f == math.Trunc(f) && math.Abs(f) < 1e18 {
		return strconv.FormatInt(int64(f), 10)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// generic writes any decoded JSON or GraphQL value with object keys sorted.
func (c canon) generic(b *bytes.Buffer, v any) {
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case string:
		b.WriteString(strconv.Quote(x))
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			c.generic(b, e)
		}
		b.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Quote(k))
			b.WriteByte(':')
			c.generic(b, x[k])
		}
		b.WriteByte('}')
	default:
		if n, ok := number(x); ok {
			b.WriteString(n)
			return
		}
		// Values a custom scalar's variables may carry: encode as JSON.
		buf, err := json.Marshal(x)
		if err != nil {
			fmt.Fprintf(b, "%T:%v", x, x)
			return
		}
		b.Write(buf)
	}
}

// selectionSet prints what the response will contain, in order.
func (c canon) selectionSet(b *bytes.Buffer, set ast.SelectionSet) {
	b.WriteByte('{')
	first := true
	for _, sel := range set {
		var dirs ast.DirectiveList
		switch s := sel.(type) {
		case *ast.Field:
			dirs = s.Directives
		case *ast.FragmentSpread:
			dirs = s.Directives
		case *ast.InlineFragment:
			dirs = s.Directives
		}
		if !c.included(dirs) {
			continue
		}
		if !first {
			b.WriteByte(',')
		}
		first = false
		switch s := sel.(type) {
		case *ast.Field:
			b.WriteString(s.Alias)
			b.WriteByte(':')
			b.WriteString(s.Name)
			var defs ast.ArgumentDefinitionList
			if s.Definition != nil {
				defs = s.Definition.Arguments
			}
			if len(s.Arguments) > 0 || len(defs) > 0 {
				c.arguments(b, defs, s.Arguments, "")
			}
			c.directives(b, s.Directives)
			if len(s.SelectionSet) > 0 {
				c.selectionSet(b, s.SelectionSet)
			}
		case *ast.FragmentSpread:
			if s.Definition == nil {
				b.WriteString("..." + s.Name)
				continue
			}
			b.WriteString("...on " + s.Definition.TypeCondition)
			c.selectionSet(b, s.Definition.SelectionSet)
		case *ast.InlineFragment:
			b.WriteString("...on " + s.TypeCondition)
			c.selectionSet(b, s.SelectionSet)
		}
	}
	b.WriteByte('}')
}

// included applies @skip and @include.
func (c canon) included(dirs ast.DirectiveList) bool {
	if d := dirs.ForName("skip"); d != nil && c.flag(d) {
		return false
	}
	if d := dirs.ForName("include"); d != nil && !c.flag(d) {
		return false
	}
	return true
}

func (c canon) flag(d *ast.Directive) bool {
	a := d.Arguments.ForName("if")
	if a == nil {
		return false
	}
	v, _ := c.value(a.Value).(bool)
	return v
}

// directives prints the directives other than @skip and @include, which
// were applied.
func (c canon) directives(b *bytes.Buffer, dirs ast.DirectiveList) {
	for _, d := range dirs {
		if d.Name == "skip" || d.Name == "include" {
			continue
		}
		b.WriteString("@" + d.Name)
		var defs ast.ArgumentDefinitionList
		if d.Definition != nil {
			defs = d.Definition.Arguments
		}
		c.arguments(b, defs, d.Arguments, "")
	}
}
