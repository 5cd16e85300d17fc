// Package document is what the hook checks of a GraphQL document before
// anything runs: how much it asks for, measured in time linear in the
// document however its fragments nest (size.go: for idemhttp's
// OperationLimits and for the bound on an idempotent field's selection),
// and whether its text can be stored by every database (text.go).
package document

import (
	"fmt"
	"math"

	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
)

// Size is what a definition (or a part of it) selects, fragments expanded.
type Size struct{ Nodes, Fields, Aliases, Depth int }

func (s *Size) add(c Size) {
	s.Nodes = SaturatingAdd(s.Nodes, c.Nodes)
	s.Fields = SaturatingAdd(s.Fields, c.Fields)
	s.Aliases = SaturatingAdd(s.Aliases, c.Aliases)
	s.Depth = max(s.Depth, c.Depth)
}

// Sizer measures the definitions of one document, expanding each fragment
// spread by reusing the size of the fragment's definition: linear in the
// document, where walking every spread would be exponential. It resolves a
// spread by name, as the validator does (the first definition of a name),
// or, when byName is nil (a validated document), by its Definition.
type Sizer struct {
	byName map[string]*ast.FragmentDefinition
	memo   map[*ast.FragmentDefinition]Size
	// open holds the fragments being measured: a spread of one of them is
	// a cycle.
	open map[*ast.FragmentDefinition]bool
}

func NewSizer(doc *ast.QueryDocument) *Sizer {
	m := &Sizer{byName: make(map[string]*ast.FragmentDefinition, len(doc.Fragments))}
	for _, f := range doc.Fragments {
		if _, ok := m.byName[f.Name]; !ok {
			m.byName[f.Name] = f
		}
	}
	return m
}

// cycleError is gqlparser's NoFragmentCycles error.
func cycleError(f *ast.FragmentDefinition) *gqlerror.Error {
	err := gqlerror.ErrorPosf(f.Position, "Cannot spread fragment %q within itself.", f.Name)
	errcode.Set(err, errcode.ValidationFailed)
	return err
}

func (m *Sizer) resolve(s *ast.FragmentSpread) *ast.FragmentDefinition {
	if m.byName == nil {
		return s.Definition
	}
	return m.byName[s.Name]
}

// Operation sizes an operation: its variables and directives, and its
// selections, fragments expanded.
func (m *Sizer) Operation(op *ast.OperationDefinition) (Size, *gqlerror.Error) {
	var s Size
	for _, v := range op.VariableDefinitions {
		s.Nodes = SaturatingAdd(s.Nodes, 1+valueNodes(v.DefaultValue)+directiveNodes(v.Directives))
	}
	s.Nodes = SaturatingAdd(s.Nodes, directiveNodes(op.Directives))
	c, err := m.set(op.SelectionSet)
	s.add(c)
	return s, err
}

// Fragment sizes a fragment definition, its spreads expanded.
func (m *Sizer) Fragment(f *ast.FragmentDefinition) (Size, *gqlerror.Error) {
	if s, ok := m.memo[f]; ok {
		return s, nil
	}
	if m.open[f] {
		return Size{}, cycleError(f)
	}
	if m.open == nil {
		m.open, m.memo = map[*ast.FragmentDefinition]bool{}, map[*ast.FragmentDefinition]Size{}
	}
	m.open[f] = true
	s, err := m.set(f.SelectionSet)
	// Validation walks a fragment's directives wherever it is spread.
	s.Nodes = SaturatingAdd(s.Nodes, directiveNodes(f.Directives))
	delete(m.open, f)
	if err != nil {
		return Size{}, err
	}
	m.memo[f] = s
	return s, nil
}

func (m *Sizer) set(set ast.SelectionSet) (Size, *gqlerror.Error) {
	var s Size
	for _, sel := range set {
		switch sel := sel.(type) {
		case *ast.Field:
			c, err := m.set(sel.SelectionSet)
			if err != nil {
				return s, err
			}
			c.Nodes = SaturatingAdd(c.Nodes, 1+directiveNodes(sel.Directives)+argumentNodes(sel.Arguments))
			c.Fields = SaturatingAdd(c.Fields, 1)
			if sel.Alias != "" && sel.Alias != sel.Name {
				c.Aliases = SaturatingAdd(c.Aliases, 1)
			}
			if sel.Name == "__schema" || sel.Name == "__type" {
				c.Depth = 0 // bounded by gqlparser's MaxIntrospectionDepth
			}
			c.Depth++
			s.add(c)
		case *ast.InlineFragment:
			c, err := m.set(sel.SelectionSet)
			if err != nil {
				return s, err
			}
			c.Nodes = SaturatingAdd(c.Nodes, 1+directiveNodes(sel.Directives))
			s.add(c)
		case *ast.FragmentSpread:
			s.add(Size{Nodes: 1 + directiveNodes(sel.Directives)})
			if f := m.resolve(sel); f != nil {
				c, err := m.Fragment(f)
				if err != nil {
					return s, err
				}
				s.add(c)
			}
		}
	}
	return s, nil
}

func directiveNodes(ds ast.DirectiveList) int {
	n := 0
	for _, d := range ds {
		n = SaturatingAdd(n, 1+argumentNodes(d.Arguments))
	}
	return n
}

func argumentNodes(args ast.ArgumentList) int {
	n := 0
	for _, a := range args {
		n = SaturatingAdd(n, 1+valueNodes(a.Value))
	}
	return n
}

func valueNodes(v *ast.Value) int {
	if v == nil {
		return 0
	}
	n := 1
	for _, c := range v.Children {
		n = SaturatingAdd(n, valueNodes(c.Value))
	}
	return n
}

// FieldPairs counts what gqlparser's OverlappingFieldsCanBeMerged
// compares in the selection sets sets: it merges them as GraphQL does
// (fragments expanded, the selections of fields that share a response name
// merged) and, in each merged selection set, counts the pairs of fields
// that share a response name, a pair of fields with arguments weighing 1
// plus the product of their argument nodes (their arguments are compared
// pairwise too). It visits each node of the expanded sets once; the
// document has no fragment cycle.
func (m *Sizer) FieldPairs(sets []ast.SelectionSet, c *Pairs) {
	var names []string
	byName := map[string][]*ast.Field{}
	var collect func(ast.SelectionSet)
	collect = func(set ast.SelectionSet) {
		for _, sel := range set {
			switch sel := sel.(type) {
			case *ast.Field:
				name := sel.Alias
				if name == "" {
					name = sel.Name
				}
				if _, ok := byName[name]; !ok {
					names = append(names, name)
				}
				byName[name] = append(byName[name], sel)
			case *ast.InlineFragment:
				collect(sel.SelectionSet)
			case *ast.FragmentSpread:
				if f := m.resolve(sel); f != nil {
					collect(f.SelectionSet)
				}
			}
		}
	}
	for _, set := range sets {
		collect(set)
	}
	for _, name := range names {
		fields := byName[name]
		if len(fields) > c.Most {
			c.Most, c.Name = len(fields), name
		}
		// The pairs, and the sum over pairs of the products of their
		// argument nodes: ((sum n)^2 - sum n^2) / 2.
		k := int64(len(fields))
		var sum, squares int64
		var children []ast.SelectionSet
		for _, f := range fields {
			n := int64(argumentNodes(f.Arguments))
			sum, squares = sum+n, squares+n*n
			if len(f.SelectionSet) > 0 {
				children = append(children, f.SelectionSet)
			}
		}
		c.Pairs = min(c.Pairs+k*(k-1)/2+(sum*sum-squares)/2, math.MaxInt32)
		if len(children) > 0 {
			m.FieldPairs(children, c)
		}
	}
}

// Pairs is what FieldPairs counts.
type Pairs struct {
	Pairs int64 // at most math.MaxInt32
	Most  int   // the most fields under one response name in one set
	Name  string
}

// ExpandedFields counts the fields of a validated selection set, each
// fragment spread expanded where it is spread.
func ExpandedFields(set ast.SelectionSet) int {
	s, _ := (&Sizer{}).set(set)
	return s.Fields
}

// SaturatingAdd adds two counts, saturating at math.MaxInt32.
func SaturatingAdd(a, b int) int {
	if a > math.MaxInt32-b {
		return math.MaxInt32
	}
	return a + b
}

// Count prints a saturated count as "more than 2147483646".
func Count(n int) string {
	if n >= math.MaxInt32 {
		return fmt.Sprintf("more than %d", math.MaxInt32-1)
	}
	return fmt.Sprint(n)
}
