package engine

import (
	"testing"
	"time"
)

func TestPaceRetryAfter(t *testing.T) {
	const s = time.Second
	trained := func(ds ...time.Duration) *pace {
		p := &pace{}
		for _, d := range ds {
			p.observe(d)
		}
		return p
	}
	for _, c := range []struct {
		name                     string
		p                        *pace
		elapsed, leaseLeft, hint time.Duration
	}{
		{"what remains of the recent duration", trained(2 * s), s / 2, 29 * s, 1500 * time.Millisecond},
		{"never more than the lease left", trained(20 * s), 0, 5 * s, 5 * s},
		{"at least a second", trained(2 * s), 3 * s, 27 * s, s},
		{"at least a second, lease nearly over", trained(20 * s), 0, s / 5, s},
		{"no history: as long again as it has run", &pace{}, 3 * s, 27 * s, 3 * s},
		{"no history, just started", &pace{}, 0, 30 * s, s},
		{"no history, bounded by the lease left", &pace{}, 40 * s, 2 * s, 2 * s},
		{"a moving average: one slow attempt moves it a quarter", trained(2*s, 2*s, 10*s), 0, 30 * s, 4 * s},
	} {
		if got := c.p.retryAfter(c.elapsed, c.leaseLeft); got != c.hint {
			t.Errorf("%s: retryAfter(%v, %v) = %v, want %v", c.name, c.elapsed, c.leaseLeft, got, c.hint)
		}
	}
}
