// Package architecture holds the tests that keep the module's shape: the
// layering of its packages (docs/architecture.md's table, which the test
// reads) and the record of every public package's API (api/*.txt). It has
// no code of its own.
package architecture
