// Package timer holds the one way this module waits: for a duration, or
// until the context ends, whichever comes first.
package timer

import (
	"context"
	"time"
)

// Sleep waits for d, or until ctx ends, and returns ctx's error if it
// ended first. A d of zero or less does not wait, but still reports a
// context that has ended, so that a loop that sleeps between steps stops
// when its context does.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
