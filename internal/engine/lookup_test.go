package engine

import (
	"sync"
	"testing"

	"github.com/goovo/idem/internal/record"
)

// Requests that want one record's lookup at once share it: the first
// runs it, the others get what it read; once it is done, the next lookup
// is a new one. Another record's lookup is its own.
func TestSharedLookups(t *testing.T) {
	var s flights[lookedUp]
	first, leader := s.join("t\x00org\x00k")
	if !leader {
		t.Fatal("the first lookup of a record has no leader")
	}
	if other, leader := s.join("t\x00org\x00other"); !leader || other == first {
		t.Fatal("another record shares the lookup")
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		read []*record.Record
	)
	for range 8 {
		l, leader := s.join("t\x00org\x00k")
		if leader || l != first {
			t.Fatal("a request that came during the lookup did not join it")
		}
		wg.Go(func() {
			<-l.ready
			mu.Lock()
			read = append(read, l.val.rec)
			mu.Unlock()
		})
	}
	rec := &record.Record{Status: "succeeded"}
	first.val.rec = rec
	s.done("t\x00org\x00k", first)
	wg.Wait()
	for _, r := range read {
		if r != rec {
			t.Fatalf("a joined request read %v, the lookup %v", r, rec)
		}
	}
	if next, leader := s.join("t\x00org\x00k"); !leader || next == first {
		t.Fatal("a lookup after the last one was done joined it")
	}
}
