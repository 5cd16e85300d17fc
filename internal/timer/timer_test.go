package timer_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/goovo/idem/internal/timer"
)

func TestSleep(t *testing.T) {
	if err := timer.Sleep(context.Background(), time.Millisecond); err != nil {
		t.Fatalf("sleep: %v", err)
	}
	if err := timer.Sleep(context.Background(), 0); err != nil {
		t.Fatalf("zero sleep: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, d := range []time.Duration{0, -time.Second, time.Hour} {
		if err := timer.Sleep(ctx, d); !errors.Is(err, context.Canceled) {
			t.Fatalf("Sleep(%v) with an ended context = %v, want context.Canceled", d, err)
		}
	}
}
