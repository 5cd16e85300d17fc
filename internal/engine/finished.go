package engine

import "sync"

// maxFinished bounds each generation of finishedRecords.
const maxFinished = 4096

// finishedRecords remembers records this process has seen finished: it
// stored their result, or replayed it. A finished record stays finished
// (it is archived or purged, never reopened), so a request for one of
// these keys is most likely a retry to replay: it looks its key up first
// instead of claiming first (see settle), one statement that reads, where
// the claim sends the lookup with an insert that writes nothing (in atomic
// mode with BEGIN and ROLLBACK) and runs the application's create builder
// to make it.
//
// It only chooses the first statement, never an answer: what the lookup
// reads decides, as it does for a lookup in any round, and a key it does
// not find (purged since) is claimed as usual, one round trip later.
//
// Two generations of at most maxFinished records each: when the current
// one is full it becomes the previous, and the oldest are forgotten.
type finishedRecords struct {
	mu                sync.Mutex
	current, previous map[string]struct{}
}

// add remembers the record id (store.Ref.ID) as finished.
func (f *finishedRecords) add(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.current[id]; ok {
		return
	}
	if f.current == nil || len(f.current) >= maxFinished {
		f.previous, f.current = f.current, make(map[string]struct{}, min(2*len(f.current)+16, maxFinished))
	}
	f.current[id] = struct{}{}
}

// has reports whether the record id was seen finished, as far as memory
// goes.
func (f *finishedRecords) has(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.current[id]; ok {
		return true
	}
	_, ok := f.previous[id]
	return ok
}
