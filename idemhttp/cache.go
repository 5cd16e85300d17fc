package idemhttp

import (
	"container/list"
	"context"
	"sync"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
)

// Defaults of the document cache (Limits.DocumentCacheBytes and
// Limits.MaxCachedDocumentBytes).
const (
	DefaultDocumentCacheBytes     = 16 << 20
	DefaultMaxCachedDocumentBytes = 64 << 10
)

// DocumentCache is gqlgen's query cache (handler.Server.SetQueryCache)
// bounded in bytes: the parsed and validated documents, keyed by their
// text, that a retry sending the same document reuses. gqlgen's own
// (lru.New) is bounded in entries, and a client decides how large an
// entry is: 1,000 distinct documents of 1 MB each (white space and a
// comment, under the body limit) kept a gigabyte after their answers.
//
// Each document is charged its text plus an estimate of its syntax tree
// (astNodeBytes for each node, measured above what gqlparser allocates per
// node), and the least recently used are dropped to stay within the
// budget. A document whose text is larger than the largest cached one is
// not cached at all: it is parsed again each time it comes, which its size
// makes rare for an honest client and cheap next to its transfer.
// Configure sets one on the server from Limits.
type DocumentCache struct {
	maxBytes, maxDocBytes int64

	mu    sync.Mutex
	bytes int64
	order *list.List // of *cachedDocument, most recently used first
	byKey map[string]*list.Element
}

type cachedDocument struct {
	key   string
	doc   *ast.QueryDocument
	bytes int64
}

var _ graphql.Cache[*ast.QueryDocument] = (*DocumentCache)(nil)

// astNodeBytes is what a node of a parsed document is charged: gqlparser
// allocates some 110 to 230 bytes per node (a field alone is the dearest,
// with its position and empty lists), measured for fields, arguments,
// values and directives.
const astNodeBytes = 256

// entryOverheadBytes is charged to each entry for the cache's own
// bookkeeping (list element, map entry, the document's struct).
const entryOverheadBytes = 512

// NewDocumentCache returns a cache that keeps at most maxBytes of
// documents, each at most maxDocumentBytes of text. A value of zero or
// less caches nothing.
func NewDocumentCache(maxBytes, maxDocumentBytes int64) *DocumentCache {
	return &DocumentCache{maxBytes: maxBytes, maxDocBytes: maxDocumentBytes, order: list.New(), byKey: map[string]*list.Element{}}
}

// Get implements graphql.Cache.
func (c *DocumentCache) Get(_ context.Context, key string) (*ast.QueryDocument, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byKey[key]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(e)
	return e.Value.(*cachedDocument).doc, true
}

// Add implements graphql.Cache. A document over the size limit, or whose
// charge alone is over the budget, is not kept.
func (c *DocumentCache) Add(_ context.Context, key string, doc *ast.QueryDocument) {
	if int64(len(key)) > c.maxDocBytes {
		return
	}
	cost := int64(len(key)) + entryOverheadBytes + astNodeBytes*int64(documentNodes(doc))
	if cost > c.maxBytes {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.byKey[key]; ok {
		return // two requests parsed it at once: the first one is kept
	}
	for c.bytes+cost > c.maxBytes {
		oldest := c.order.Back()
		d := c.order.Remove(oldest).(*cachedDocument)
		delete(c.byKey, d.key)
		c.bytes -= d.bytes
	}
	c.byKey[key] = c.order.PushFront(&cachedDocument{key: key, doc: doc, bytes: cost})
	c.bytes += cost
}

// Bytes is what the documents kept are charged, at most the budget.
func (c *DocumentCache) Bytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes
}

// documentNodes counts the nodes of doc's syntax tree: definitions,
// selections, arguments, values, directives and variable definitions,
// each fragment once (as it is stored, not as it is spread).
func documentNodes(doc *ast.QueryDocument) int {
	n := 0
	for _, op := range doc.Operations {
		n += 1 + directiveNodes(op.Directives) + selectionNodes(op.SelectionSet)
		for _, v := range op.VariableDefinitions {
			n += 2 + valueNodes(v.DefaultValue) + directiveNodes(v.Directives) // the type too
		}
	}
	for _, f := range doc.Fragments {
		n += 1 + directiveNodes(f.Directives) + selectionNodes(f.SelectionSet)
	}
	return n
}

func selectionNodes(set ast.SelectionSet) int {
	n := 0
	for _, s := range set {
		n++
		switch s := s.(type) {
		case *ast.Field:
			n += directiveNodes(s.Directives) + selectionNodes(s.SelectionSet)
			for _, a := range s.Arguments {
				n += 1 + valueNodes(a.Value)
			}
		case *ast.FragmentSpread:
			n += directiveNodes(s.Directives)
		case *ast.InlineFragment:
			n += directiveNodes(s.Directives) + selectionNodes(s.SelectionSet)
		}
	}
	return n
}

func directiveNodes(ds ast.DirectiveList) int {
	n := 0
	for _, d := range ds {
		n++
		for _, a := range d.Arguments {
			n += 1 + valueNodes(a.Value)
		}
	}
	return n
}

func valueNodes(v *ast.Value) int {
	if v == nil {
		return 0
	}
	n := 1
	for _, c := range v.Children {
		n += 1 + valueNodes(c.Value)
	}
	return n
}
