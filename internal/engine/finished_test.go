package engine

import (
	"fmt"
	"testing"
)

// finishedRecords remembers at least the last maxFinished records and at
// most two generations of them.
func TestFinishedRecordsForgetTheOldest(t *testing.T) {
	var f finishedRecords
	if f.has("a") {
		t.Fatal("an empty memory has a record")
	}
	id := func(i int) string { return fmt.Sprintf("t\x00org\x00key-%d", i) }
	total := 2*maxFinished + maxFinished/2
	for i := range total {
		f.add(id(i))
		f.add(id(i)) // twice: counted once
	}
	for i := total - maxFinished; i < total; i++ {
		if !f.has(id(i)) {
			t.Fatalf("record %d of %d forgotten; the last %d must be remembered", i, total, maxFinished)
		}
	}
	if f.has(id(0)) {
		t.Error("the oldest record is still remembered after two generations")
	}
	if n := len(f.current) + len(f.previous); n > 2*maxFinished {
		t.Errorf("%d records remembered, at most %d", n, 2*maxFinished)
	}
}
