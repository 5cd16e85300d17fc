package testapp_test

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/goovo/idem"
	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/testkit/testapp"
)

// BenchmarkPath measures one variant of BenchmarkCreate alone, one request
// per op, for a CPU profile of one path (-cpuprofile, -memprofile) and its
// allocations (-benchmem), on pgx:
//
//	plain            the create with no idempotency
//	lease, atomic    the first call of a new key (atomic: the claim born
//	                 completed, one INSERT)
//	atomic-tx        the same atomic create with
//	                 Config.NoOneStatementCreate: the atomic path
//	replay           a retry of a stored lease-mode key, which this process
//	                 stored (and replayed before)
//	replay-elsewhere a retry of a key stored by another process (another
//	                 handler, untimed): the first this process sees of it
//	optin-atomic, optin-lease  the first call of a key of a hand-written
//	                 mutation that opts in with @idempotent
//	                 (createShipmentOptIn, -Lease)
func BenchmarkPath(b *testing.B) {
	be := testapp.NewBench(b, idemtest.Postgres, idem.Config{})
	h := be.Server.Config.Handler
	mutation := createBody
	send := sendCreate
	elsewhere := be.Handler(be.Client, be.Resolver, idem.Config{})
	// The atomic path, as before the one-statement create.
	txOnly := be.Handler(be.Client, be.Resolver, idem.Config{NoOneStatementCreate: true})
	n := 0
	send(b, h, mutation("createShipmentLease", "replayed-key"))
	for _, v := range []struct {
		name string
		body func(i int) string
	}{
		{"plain", func(int) string { return mutation("createShipmentPlain", "") }},
		{"lease", func(i int) string { return mutation("createShipmentLease", fmt.Sprintf("lease-%d", i)) }},
		{"atomic", func(i int) string { return mutation("createShipmentAtomic", fmt.Sprintf("atomic-%d", i)) }},
		{"atomic-tx", func(i int) string { return mutation("createShipmentAtomic", fmt.Sprintf("atomic-tx-%d", i)) }},
		{"replay", func(int) string { return mutation("createShipmentLease", "replayed-key") }},
		{"replay-elsewhere", func(i int) string { return mutation("createShipmentLease", fmt.Sprintf("elsewhere-%d", i)) }},
		{"optin-atomic", func(i int) string { return mutation("createShipmentOptIn", fmt.Sprintf("optin-atomic-%d", i)) }},
		{"optin-lease", func(i int) string { return mutation("createShipmentOptInLease", fmt.Sprintf("optin-lease-%d", i)) }},
	} {
		b.Run(v.name, func(b *testing.B) {
			// Keys new to every run (b.N grows from run to run).
			first := n
			n += b.N
			if v.name == "replay-elsewhere" {
				for i := range b.N {
					send(b, elsewhere, v.body(first+i))
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			target := h
			if v.name == "atomic-tx" {
				target = txOnly
			}
			before := processCPU(b)
			for i := range b.N {
				send(b, target, v.body(first+i))
			}
			b.StopTimer()
			b.ReportMetric(float64((processCPU(b)-before).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}

// processCPU is the CPU time the process has spent so far, user and system.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
