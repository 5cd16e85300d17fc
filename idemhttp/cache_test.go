package idemhttp_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"

	"github.com/goovo/idem/idemhttp"
)

// The document cache keeps what its budget allows, counted in bytes: the
// most recently used documents, none over the size limit, and what it
// charges covers what the kept documents hold on the heap.
func TestDocumentCacheIsBoundedInBytes(t *testing.T) {
	ctx := context.Background()
	const budget, largest = 1 << 20, 16 << 10
	c := idemhttp.NewDocumentCache(budget, largest)
	parse := func(q string) *ast.QueryDocument {
		doc, err := parser.ParseQuery(&ast.Source{Input: q})
		if err != nil {
			t.Fatal(err)
		}
		return doc
	}
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}

	big := "{ a } #" + strings.Repeat("x", largest)
	c.Add(ctx, big, parse(big))
	if _, ok := c.Get(ctx, big); ok {
		t.Fatalf("a document of %d bytes was cached; the largest cached is %d", len(big), largest)
	}

	// Small texts of many nodes (a field costs gqlgen some 220 bytes for
	// its 2 of text): the text alone would undercount them a hundredfold.
	first := "{ first }"
	c.Add(ctx, first, parse(first))
	before := heap()
	for i := range 2000 {
		q := fmt.Sprintf("{ n%d %s }", i, strings.Repeat("a ", 200))
		c.Add(ctx, q, parse(q))
		if i%10 == 0 { // used again: the least recently used go first
			if _, ok := c.Get(ctx, first); !ok {
				t.Fatalf("after %d documents, the one used every time was dropped", i)
			}
		}
	}
	kept := int64(heap()) - int64(before)
	if c.Bytes() > budget {
		t.Fatalf("the cache charges %d bytes for what it keeps; its budget is %d", c.Bytes(), budget)
	}
	// The documents kept hold no more than what they were charged, and a
	// margin for the runtime's own.
	if kept > budget+256<<10 {
		t.Fatalf("the documents kept hold %d bytes of heap; the budget is %d", kept, budget)
	}
	t.Logf("charged %d bytes, %d bytes of heap kept", c.Bytes(), kept)
}
