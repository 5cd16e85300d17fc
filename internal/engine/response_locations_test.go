package engine

import (
	"testing"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"github.com/vektah/gqlparser/v2/parser"
)

// A stored error below the root field is placed on the field it names in
// this request's document, through aliases, list indexes and fragments; an
// error whose field is not in this document loses its location.
func TestErrorsAtPlacesChildErrors(t *testing.T) {
	doc, err := parser.ParseQuery(&ast.Source{Input: `mutation {
  p2: pay {
    id
    ... on Payment { o: order {
      ...F } }
  }
}
fragment F on Order {
      lines { amount }
}`})
	if err != nil {
		t.Fatal(err)
	}
	// The validator links spreads to their definitions; do it by hand.
	root := doc.Operations[0].SelectionSet[0].(*ast.Field)
	order := root.SelectionSet[1].(*ast.InlineFragment).SelectionSet[0].(*ast.Field)
	order.SelectionSet[0].(*ast.FragmentSpread).Definition = doc.Fragments[0]

	stored := storedResponse{Errors: gqlerror.List{
		{Message: "root", Path: ast.Path{ast.PathName("pay")}, Locations: []gqlerror.Location{{Line: 9, Column: 9}}},
		{Message: "deep", Path: ast.Path{ast.PathName("pay"), ast.PathName("o"), ast.PathName("lines"), ast.PathIndex(2), ast.PathName("amount")}},
		{Message: "gone", Path: ast.Path{ast.PathName("pay"), ast.PathName("nothing")}, Locations: []gqlerror.Location{{Line: 1, Column: 1}}},
		{Message: "no path", Locations: []gqlerror.Location{{Line: 1, Column: 1}}},
	}}
	got := stored.errorsAt(root)
	want := []struct {
		path string
		loc  *gqlerror.Location
	}{
		{"p2", &gqlerror.Location{Line: 2, Column: 3}},
		{"p2.o.lines[2].amount", &gqlerror.Location{Line: 9, Column: 15}},
		{"p2.nothing", nil},
		{"", nil},
	}
	for i, w := range want {
		e := got[i]
		if e.Path.String() != w.path {
			t.Errorf("%s: path %s, want %s", e.Message, e.Path, w.path)
		}
		switch {
		case w.loc == nil && len(e.Locations) > 0:
			t.Errorf("%s: location %v kept, want none", e.Message, e.Locations)
		case w.loc != nil && (len(e.Locations) != 1 || e.Locations[0] != *w.loc):
			t.Errorf("%s: locations %v, want %v", e.Message, e.Locations, *w.loc)
		}
	}
	if stored.Errors[0].Locations[0].Line != 9 {
		t.Error("errorsAt changed the stored errors")
	}
}
