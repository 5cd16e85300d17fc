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
	"reflect"
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
	// Owner is the truncated SHA-256 hash, in hex, of who sent the request
	// within its tenant (idem.Config.KeyOwner; OwnerOf); "" when the
	// application does not say, and the key belongs to the tenant.
	Owner string
	// ArgumentsSize is the length of the arguments' canonical form, for the
	// hook's size limit (it is not part of String).
	ArgumentsSize int
}

// OwnerOf is the Owner of a request sent by owner ("" for a request that
// acts for its tenant alone, which owns its keys as any other caller).
func OwnerOf(owner string) string { return digest([]byte("owner\x00" + owner)) }

// OtherOwner reports whether a request whose fingerprint is got is
// another caller's than the one whose request stored stored: both say who
// sent them, and they differ. A record stored before the application said
// who its callers are belongs to its tenant.
func OtherOwner(stored, got string) bool {
	a, okA := Parse(stored)
	b, okB := Parse(got)
	return okA && okB && a.Owner != "" && b.Owner != "" && a.Owner != b.Owner
}

// String encodes f for storage.
func (f Fingerprint) String() string {
	s := version + ":" + f.Field + ":" + f.Arguments + ":" + f.Selection
	if f.Owner != "" {
		s += ":" + f.Owner
	}
	return s
}

// Prefix is how every stored fingerprint of field ("<Type>.<field>")
// begins: the store selects a mutation's records by it.
func Prefix(field string) string { return version + ":" + field + ":" }

// Parse decodes a stored fingerprint.
func Parse(s string) (Fingerprint, bool) {
	parts := strings.Split(s, ":")
	if len(parts) < 4 || len(parts) > 5 || parts[0] != version {
		return Fingerprint{}, false
	}
	f := Fingerprint{Field: parts[1], Arguments: parts[2], Selection: parts[3]}
	if len(parts) == 5 {
		f.Owner = parts[4]
	}
	return f, true
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
// leaving out the argument paths leaveOut: the idempotency key's argument,
// and the paths a mutation excludes (@idempotent(fingerprintExclude:)). A
// path is an argument's name, then input-object field names, dotted
// ("input.clientTime"); through a list it names the field of every element.
// A path left out counts as absent, whatever its value.
func Of(schema *ast.Schema, typeName string, field *ast.Field, vars map[string]any, leaveOut ...string) Fingerprint {
	var args, sel bytes.Buffer
	c := canon{schema: schema, vars: vars}
	var defs ast.ArgumentDefinitionList
	if field.Definition != nil {
		defs = field.Definition.Arguments
	}
	c.withLeaveOut(leaveOut).arguments(&args, defs, field.Arguments)
	c.selectionSet(&sel, resultType(field), field.SelectionSet)
	return Fingerprint{Field: typeName + "." + field.Name, Arguments: digest(args.Bytes()), Selection: digest(sel.Bytes()), ArgumentsSize: args.Len()}
}

// CanonicalArguments returns the canonical text of field's arguments, the
// paths leaveOut left out (see Of), for tests and debugging.
func CanonicalArguments(schema *ast.Schema, field *ast.Field, vars map[string]any, leaveOut ...string) string {
	var b bytes.Buffer
	var defs ast.ArgumentDefinitionList
	if field.Definition != nil {
		defs = field.Definition.Arguments
	}
	canon{schema: schema, vars: vars}.withLeaveOut(leaveOut).arguments(&b, defs, field.Arguments)
	return b.String()
}

// CheckPaths reports the first of paths that names no argument path of the
// field definition f (see Of): its first name must be an argument of f,
// and every next one a field of the input object before it (lists are
// looked through).
func CheckPaths(schema *ast.Schema, f *ast.FieldDefinition, paths []string) error {
	for _, p := range paths {
		names := strings.Split(p, ".")
		if slices.Contains(names, "") {
			return fmt.Errorf("%q is not a path: argument and field names joined by dots, like input.clientTime", p)
		}
		arg := f.Arguments.ForName(names[0])
		if arg == nil {
			return fmt.Errorf("%q: %s has no argument %s", p, f.Name, names[0])
		}
		typ, where := arg.Type, names[0]
		for _, name := range names[1:] {
			def := schema.Types[typ.Name()]
			if def == nil || def.Kind != ast.InputObject {
				return fmt.Errorf("%q: %s is a %s, not an input object with fields", p, where, typ.Name())
			}
			field := def.Fields.ForName(name)
			if field == nil {
				return fmt.Errorf("%q: %s (%s) has no field %s", p, where, def.Name, name)
			}
			typ, where = field.Type, where+"."+name
		}
	}
	return nil
}

// CanonicalSelection returns the canonical text of field's selection set.
func CanonicalSelection(schema *ast.Schema, field *ast.Field, vars map[string]any) string {
	var b bytes.Buffer
	canon{schema: schema, vars: vars}.selectionSet(&b, resultType(field), field.SelectionSet)
	return b.String()
}

// resultType is the named type a field returns ("" when unknown).
func resultType(field *ast.Field) string {
	if field.Definition == nil {
		return ""
	}
	return field.Definition.Type.Name()
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

type canon struct {
	schema *ast.Schema
	vars   map[string]any
	// leaveOut are the argument paths left out of the root field's
	// arguments (see Of); nil for the arguments of the selection set. They
	// are few: a linear search allocates nothing.
	leaveOut []string
	// nested: some path of leaveOut names an input field, so the paths of
	// input fields are built and looked up (only then: the common request
	// excludes its key argument alone, and pays nothing for the others).
	nested bool
}

func (c canon) withLeaveOut(paths []string) canon {
	c.leaveOut = paths
	c.nested = slices.ContainsFunc(paths, func(p string) bool { return strings.Contains(p, ".") })
	return c
}

// left reports whether the value at path is left out.
func (c canon) left(path string) bool { return slices.Contains(c.leaveOut, path) }

// child is the path of an input object's field name at path, when paths
// of input fields are looked up at all (nested); "" otherwise.
func (c canon) child(path, name string) string {
	if !c.nested {
		return ""
	}
	return path + "." + name
}

// arguments writes the arguments sorted by name, each with the value given
// or, when it is absent, its default; absent arguments without a default are
// left out (GraphQL tells them apart from an explicit null), and so are the
// paths of c.leaveOut.
func (c canon) arguments(b *bytes.Buffer, defs ast.ArgumentDefinitionList, args ast.ArgumentList) {
	type arg struct {
		name string
		typ  *ast.Type
		val  any
	}
	list := make([]arg, 0, len(defs))
	for _, d := range defs {
		if c.left(d.Name) {
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
		if defs.ForName(a.Name) == nil && !c.left(a.Name) {
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
		c.typed(b, a.typ, a.val, a.name)
	}
	b.WriteByte(')')
}

// asList returns the elements of any slice: literals decode to []any, but
// variables coerced by gqlparser's validator come as typed slices.
func asList(v any) ([]any, bool) {
	if l, ok := v.([]any); ok {
		return l, true
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Slice {
		return nil, false
	}
	out := make([]any, rv.Len())
	for i := range out {
		out[i] = rv.Index(i).Interface()
	}
	return out, true
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

// typed writes v, the value at path, coerced to the input type t (nil when
// unknown).
func (c canon) typed(b *bytes.Buffer, t *ast.Type, v any, path string) {
	if v == nil {
		b.WriteString("null")
		return
	}
	if t == nil {
		c.generic(b, v)
		return
	}
	if t.Elem != nil {
		list, ok := asList(v)
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
			c.typed(b, t.Elem, e, path)
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
		c.inputObject(b, def, m, path)
	case ast.Enum:
		c.generic(b, v)
	default:
		c.scalar(b, def.Name, v)
	}
}

func (c canon) inputObject(b *bytes.Buffer, def *ast.Definition, m map[string]any, path string) {
	type entry struct {
		name string
		typ  *ast.Type
		val  any
	}
	var list []entry
	for _, f := range def.Fields {
		if c.nested && c.left(c.child(path, f.Name)) {
			continue
		}
		if v, ok := m[f.Name]; ok {
			list = append(list, entry{f.Name, f.Type, v})
		} else if f.DefaultValue != nil {
			list = append(list, entry{f.Name, f.Type, c.value(f.DefaultValue)})
		}
	}
	for name, v := range m {
		if def.Fields.ForName(name) == nil && !(c.nested && c.left(c.child(path, name))) {
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
		c.typed(b, e.typ, e.val, c.child(path, e.name))
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
	case "Int":
		if n, ok := number(v); ok {
			b.WriteString(n)
			return
		}
	case "Float":
		// Every number is a float here: 1, 1.0 and 1e0 are one value.
		if f, ok := toFloat(v); ok {
			b.WriteString(formatFloat(f))
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

func toFloat(v any) (float64, bool) {
	switch n := v.(type) {
	case int:
		return float64(n), true
	case int32:
		return float64(n), true
	case int64:
		return float64(n), true
	case uint64:
		return float64(n), true
	case float64:
		return n, true
	case json.Number:
		f, err := strconv.ParseFloat(string(n), 64)
		return f, err == nil
	}
	return 0, false
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

// selectionSet prints what the response will contain, in order: the fields
// collected as GraphQL's CollectFields does (fragments that apply to the
// type expanded, fields of one response name merged, @skip/@include
// applied), so that two spellings of one response print alike. Under an
// interface or a union the result depends on the concrete type: the
// collection is printed for each possible type.
func (c canon) selectionSet(b *bytes.Buffer, typeName string, set ast.SelectionSet) {
	def := c.schema.Types[typeName]
	if def == nil || def.Kind == ast.Object {
		c.collected(b, typeName, set)
		return
	}
	var names []string
	for _, t := range c.schema.GetPossibleTypes(def) {
		names = append(names, t.Name)
	}
	slices.Sort(names)
	b.WriteByte('<')
	for i, name := range names {
		if i > 0 {
			b.WriteByte(';')
		}
		b.WriteString(name)
		b.WriteByte('=')
		c.collected(b, name, set)
	}
	b.WriteByte('>')
}

// collectedField is one response name of a selection set.
type collectedField struct {
	field *ast.Field
	subs  ast.SelectionSet
}

// collection is the response names of a selection set, in the order of
// their first appearance; index finds them by alias once they are many
// (a linear search of a few allocates nothing).
type collection struct {
	fields []collectedField
	index  map[string]int
}

// indexFrom is how many response names a collection finds by a linear
// search.
const indexFrom = 16

// of returns the entry of s's response name (its alias), added when new.
func (l *collection) of(s *ast.Field) *collectedField {
	if l.index != nil {
		if i, ok := l.index[s.Alias]; ok {
			return &l.fields[i]
		}
	} else {
		for i := range l.fields {
			if l.fields[i].field.Alias == s.Alias {
				return &l.fields[i]
			}
		}
	}
	l.fields = append(l.fields, collectedField{field: s})
	switch n := len(l.fields); {
	case n == indexFrom:
		l.index = make(map[string]int, 2*indexFrom)
		for i, f := range l.fields {
			l.index[f.field.Alias] = i
		}
	case n > indexFrom:
		l.index[s.Alias] = n - 1
	}
	return &l.fields[len(l.fields)-1]
}

// collect adds the fields set yields for an object of type objType to l.
func (c canon) collect(l *collection, objType string, set ast.SelectionSet) {
	for _, sel := range set {
		switch s := sel.(type) {
		case *ast.Field:
			if !c.included(s.Directives) {
				continue
			}
			f := l.of(s)
			f.subs = append(f.subs, s.SelectionSet...)
		case *ast.FragmentSpread:
			if c.included(s.Directives) && s.Definition != nil && c.applies(s.Definition.TypeCondition, objType) {
				c.collect(l, objType, s.Definition.SelectionSet)
			}
		case *ast.InlineFragment:
			if c.included(s.Directives) && c.applies(s.TypeCondition, objType) {
				c.collect(l, objType, s.SelectionSet)
			}
		}
	}
}

// collected prints the fields set yields for an object of type objType.
func (c canon) collected(b *bytes.Buffer, objType string, set ast.SelectionSet) {
	l := collection{fields: make([]collectedField, 0, len(set))}
	c.collect(&l, objType, set)
	b.WriteByte('{')
	for i := range l.fields {
		if i > 0 {
			b.WriteByte(',')
		}
		f := l.fields[i].field
		b.WriteString(f.Alias)
		b.WriteByte(':')
		b.WriteString(f.Name)
		var defs ast.ArgumentDefinitionList
		if f.Definition != nil {
			defs = f.Definition.Arguments
		}
		if len(f.Arguments) > 0 || len(defs) > 0 {
			c.arguments(b, defs, f.Arguments)
		}
		c.directives(b, f.Directives)
		if subs := l.fields[i].subs; len(subs) > 0 {
			var typeName string
			if f.Definition != nil {
				typeName = f.Definition.Type.Name()
			}
			c.selectionSet(b, typeName, subs)
		}
	}
	b.WriteByte('}')
}

// applies reports whether a fragment with type condition cond applies to an
// object of type objType.
func (c canon) applies(cond, objType string) bool {
	if cond == "" || cond == objType {
		return true
	}
	def := c.schema.Types[cond]
	if def == nil {
		return false
	}
	for _, t := range c.schema.GetPossibleTypes(def) {
		if t.Name == objType {
			return true
		}
	}
	return false
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
		c.arguments(b, defs, d.Arguments)
	}
}
