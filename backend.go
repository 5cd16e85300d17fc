package idem

import (
	"github.com/goovo/idem/idembackend"
	"github.com/goovo/idem/internal/store"
)

// storeTable is where the store finds the records of t.
func storeTable(t *idembackend.RecordTable) store.Table {
	return store.Table{Name: t.Table, Scope: t.ScopeColumn, ID: t.IDColumn}
}

// openStore returns the store driver of cfg.Backend's dialect, its clock
// moved by cfg.Clock.
func openStore(cfg Config) (store.Driver, error) {
	return store.Open(cfg.Backend.Dialect(), cfg.Backend, store.Options{Offset: cfg.Clock.Offset})
}
