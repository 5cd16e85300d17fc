package idem

import "github.com/goovo/idem/internal/store"

// openStore returns the store driver of cfg.Backend's dialect, its clock
// moved by cfg.Clock.
func openStore(cfg Config) (store.Driver, error) {
	return store.Open(cfg.Backend.Dialect(), cfg.Backend, store.Options{Offset: cfg.Clock.Offset})
}
