// Package storetest is the conformance suite of store.Driver: every driver
// must pass it, on real tables made by ent from the mixin, with real
// concurrency at the SQL level. Each test states one promise of the seam:
// one winner among concurrent claims, one taker among concurrent
// takeovers, no effect from an attempt that lost its claim, fenced lease
// changes, sweeps that race claims and takeovers without losing or
// doubling a row, batches that move each row exactly once.
//
// It imports testing and is meant for _test.go files only.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/goovo/idem/idembackend"
	"github.com/goovo/idem/internal/fingerprint"
	"github.com/goovo/idem/internal/record"
	"github.com/goovo/idem/internal/store"
)

// Env is one fresh database for one test of the suite.
type Env struct {
	// Driver is the driver under test.
	Driver store.Driver
	// Records is a table that holds nothing but records
	// (idemschema.Record); Business is a business entity's table, whose
	// succeeded rows stay when their key is forgotten.
	Records, Business Table
	// Archive is the archive table (idemschema.Archive).
	Archive string
	// Count counts the rows of a table, key or not.
	Count func(ctx context.Context, table string) (int, error)
}

// Table is a record table, and how a claim inserts its row.
type Table struct {
	store.Table
	// Insert inserts the pending row of c with INSERT … ON CONFLICT DO
	// NOTHING (the generated claim insert), in tx or by itself.
	Insert func(ctx context.Context, tx idembackend.Tx, c Claim) (bool, error)
}

// Claim is a claim to insert: attempt 1 of (Tenant, Key).
type Claim struct {
	Tenant, Key, Fingerprint string
	ClaimedAt, LeaseUntil    time.Time
	// Operation is what the claim keeps for the recoverer (nil: nothing).
	Operation []byte
}

// Run runs the suite; open returns a fresh Env for each test (on a
// database of its own: the tests run in parallel).
func Run(t *testing.T, open func(t *testing.T) *Env) {
	for _, c := range []struct {
		name string
		test func(t *testing.T, s *suite)
	}{
		{"LookupReadsTheRecordAndTheClock", testLookup},
		{"ConcurrentClaimsHaveOneWinner", testConcurrentClaims},
		{"ConcurrentClaimsInTransactionsWaitForTheWinner", testConcurrentClaimsInTransactions},
		{"ConcurrentTakeoversHaveOneTaker", testConcurrentTakeovers},
		{"AttemptThatLostItsClaimChangesNothing", testFencedCompletion},
		{"RenewAndReleaseAreFenced", testRenewAndRelease},
		{"CompletionCommitsTheWrites", testCompletionCommitsTheWrites},
		{"DiscardWritesKeepsTheClaim", testDiscardWrites},
		{"PurgeOfAbandonedClaimsRacesTakeovers", testPurgeRacesTakeovers},
		{"PurgeOfATombstoneRacesAClaim", testPurgeRacesAClaim},
		{"SweepersMoveEachRowOnce", testSweepersMoveEachRowOnce},
		{"ArchiveBatchSelectsOneMutation", testArchiveOneMutation},
		{"OperatorReads", testOperatorReads},
		{"AbandonedClaimsKeepTheirOperation", testAbandoned},
		{"AbandonedClaimsTakeTurnsByTenant", testAbandonedTurns},
		{"RequeueMovesAClaimBackFenced", testRequeue},
		{"MissingTableIsErrNoTable", testMissingTable},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.test(t, &suite{Env: open(t), t: t, ctx: context.Background()})
		})
	}
}

// suite is one test's Env with the steps the tests share.
type suite struct {
	*Env
	t   *testing.T
	ctx context.Context
}

func (s *suite) now() time.Time {
	s.t.Helper()
	r, err := s.Driver.Now(s.ctx)
	if err != nil {
		s.t.Fatalf("now: %v", err)
	}
	return r.Now()
}

func ref(t Table, tenant, key string) store.Ref {
	return store.Ref{Table: t.Table, Tenant: tenant, Key: key}
}

// claim claims (tenant, key) of t by itself, with a lease until
// leaseUntil, and fails the test unless it wins.
func (s *suite) claim(t Table, tenant, key string, leaseUntil time.Time) {
	s.t.Helper()
	c, err := s.claimIn(nil, t, tenant, key, leaseUntil)
	if err != nil || !c.Won {
		s.t.Fatalf("claim %s/%s: %+v %v", tenant, key, c, err)
	}
}

func (s *suite) claimIn(tx idembackend.Tx, t Table, tenant, key string, leaseUntil time.Time) (store.Claimed, error) {
	return s.claimWith(tx, t, tenant, key, "fp-"+key, leaseUntil)
}

func (s *suite) claimWith(tx idembackend.Tx, t Table, tenant, key, fp string, leaseUntil time.Time) (store.Claimed, error) {
	now := s.now()
	c := Claim{Tenant: tenant, Key: key, Fingerprint: fp, ClaimedAt: now, LeaseUntil: leaseUntil,
		Operation: []byte(`{"query":"mutation { ` + key + ` }"}`)}
	if strings.HasPrefix(key, "no-operation") {
		c.Operation = nil
	}
	return s.Driver.Claim(s.ctx, store.Claim{Ref: ref(t, tenant, key), Tx: tx,
		Insert: func(ctx context.Context, tx idembackend.Tx) (bool, error) { return t.Insert(ctx, tx, c) }})
}

// complete stores a result of attempt by itself; it fails the test on an
// error.
func (s *suite) complete(t Table, tenant, key string, attempt int, status, response string) bool {
	s.t.Helper()
	ok, err := s.Driver.Complete(s.ctx, nil, store.Completion{Ref: ref(t, tenant, key), Attempt: attempt,
		Status: status, Response: []byte(response), At: s.now()})
	if err != nil {
		s.t.Fatalf("complete %s/%s: %v", tenant, key, err)
	}
	return ok
}

func (s *suite) lookup(t Table, tenant, key string) *record.Record {
	s.t.Helper()
	rec, _, err := s.Driver.Lookup(s.ctx, ref(t, tenant, key))
	if err != nil {
		s.t.Fatalf("lookup %s/%s: %v", tenant, key, err)
	}
	return rec
}

func (s *suite) begin() idembackend.Tx {
	s.t.Helper()
	_, tx, err := s.Driver.Begin(s.ctx)
	if err != nil {
		s.t.Fatalf("begin: %v", err)
	}
	return tx
}

// concurrently runs f(i) for i in [0, n) at once and waits for all.
func concurrently(n int, f func(i int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			f(i)
		})
	}
	close(start)
	wg.Wait()
}

// near reports whether a and b are within a millisecond (databases keep
// microseconds at best).
func near(a, b time.Time) bool { return a.Sub(b).Abs() < time.Millisecond }

func testLookup(t *testing.T, s *suite) {
	rec, reading, err := s.Driver.Lookup(s.ctx, ref(s.Records, "t1", "k"))
	if err != nil || rec != nil {
		t.Fatalf("unknown key: %+v %v", rec, err)
	}
	if d := reading.Now().Sub(time.Now()).Abs(); d > time.Minute {
		t.Fatalf("the database clock reads %v, %v from this machine's", reading.Now(), d)
	}
	lease := s.now().Add(time.Minute)
	s.claim(s.Records, "t1", "k", lease)
	rec = s.lookup(s.Records, "t1", "k")
	if rec == nil || rec.Status != record.StatusPending || rec.Attempt != 1 || rec.Fingerprint != "fp-k" ||
		!near(rec.LeaseExpiresAt, lease) || rec.ClaimedAt.IsZero() || !rec.CompletedAt.IsZero() || len(rec.Response) != 0 {
		t.Fatalf("claimed record: %+v", rec)
	}
	if other := s.lookup(s.Records, "t2", "k"); other != nil {
		t.Fatalf("another tenant sees the record: %+v", other)
	}
}

// Claims that commit by themselves (lease mode): exactly one wins, and
// every loser reads the winner's record.
func testConcurrentClaims(t *testing.T, s *suite) {
	const n = 16
	lease := s.now().Add(time.Minute)
	var won atomic.Int32
	concurrently(n, func(i int) {
		c, err := s.claimIn(nil, s.Business, "t1", "k", lease)
		switch {
		case err != nil:
			t.Errorf("claim %d: %v", i, err)
		case c.Won:
			won.Add(1)
		case c.Holder == nil || c.Holder.Status != record.StatusPending || c.Holder.Attempt != 1:
			t.Errorf("claim %d lost to %+v", i, c.Holder)
		}
	})
	if won.Load() != 1 {
		t.Fatalf("%d winners, want 1", won.Load())
	}
}

// Claims inside transactions (atomic mode): a loser waits for the winner's
// transaction and reads its committed result; its own transaction is
// rolled back.
func testConcurrentClaimsInTransactions(t *testing.T, s *suite) {
	const n = 8
	lease := s.now().Add(time.Minute)
	var won atomic.Int32
	concurrently(n, func(i int) {
		_, tx, err := s.Driver.Begin(s.ctx)
		if err != nil {
			t.Errorf("begin %d: %v", i, err)
			return
		}
		c, err := s.claimIn(tx, s.Business, "t1", "k", lease)
		switch {
		case err != nil:
			t.Errorf("claim %d: %v", i, err)
		case c.Won:
			won.Add(1)
			time.Sleep(100 * time.Millisecond) // the others wait on the unique index, or the write lock
			ok, err := s.Driver.Complete(s.ctx, tx, store.Completion{Ref: ref(s.Business, "t1", "k"), Attempt: 1,
				Status: record.StatusSucceeded, Response: []byte(`"won"`), At: s.now()})
			if err != nil || !ok {
				t.Errorf("complete: %v %v", ok, err)
			}
		case c.Holder == nil || c.Holder.Status != record.StatusSucceeded || string(c.Holder.Response) != `"won"`:
			t.Errorf("claim %d lost to %+v, want the winner's committed result", i, c.Holder)
		default:
			if err := tx.Commit(); err == nil {
				t.Errorf("claim %d: the losing claim's transaction is still open", i)
			}
		}
	})
	if won.Load() != 1 {
		t.Fatalf("%d winners, want 1", won.Load())
	}
}

func testConcurrentTakeovers(t *testing.T, s *suite) {
	const n = 16
	now := s.now()
	s.claim(s.Records, "t1", "k", now.Add(-time.Second))
	lease := now.Add(time.Minute)
	var took atomic.Int32
	concurrently(n, func(i int) {
		ok, err := s.Driver.TakeOver(s.ctx, store.TakeOver{Ref: ref(s.Records, "t1", "k"), Attempt: 1, Now: now, LeaseUntil: lease})
		if err != nil {
			t.Errorf("take over %d: %v", i, err)
		}
		if ok {
			took.Add(1)
		}
	})
	if took.Load() != 1 {
		t.Fatalf("%d takers, want 1", took.Load())
	}
	if rec := s.lookup(s.Records, "t1", "k"); rec.Attempt != 2 || !near(rec.LeaseExpiresAt, lease) || rec.Status != record.StatusPending {
		t.Fatalf("taken over: %+v", rec)
	}
	for _, tk := range []store.TakeOver{
		{Attempt: 1, Now: now.Add(2 * time.Minute)}, // the attempt it saw is gone
		{Attempt: 2, Now: now},                      // the lease is live
	} {
		tk.Ref, tk.LeaseUntil = ref(s.Records, "t1", "k"), now.Add(time.Hour)
		if ok, err := s.Driver.TakeOver(s.ctx, tk); ok || err != nil {
			t.Fatalf("take over %+v: %v %v", tk, ok, err)
		}
	}
}

// An attempt whose claim was taken over can neither complete, in its
// transaction or out of it, nor keep the writes it made: the new attempt's
// result is the only one.
func testFencedCompletion(t *testing.T, s *suite) {
	now := s.now()
	s.claim(s.Records, "t1", "k", now.Add(-time.Second))
	takeOver := func() {
		if ok, err := s.Driver.TakeOver(s.ctx, store.TakeOver{Ref: ref(s.Records, "t1", "k"), Attempt: 1, Now: now, LeaseUntil: now.Add(time.Minute)}); !ok || err != nil {
			t.Fatalf("take over: %v %v", ok, err)
		}
	}
	// Where live attempts' leases are renewed, a takeover may happen while
	// the old attempt's transaction is open; elsewhere (SQLite) that
	// transaction holds the one write lock, and the takeover comes first.
	live := s.Driver.Traits().RenewLeases
	if !live {
		takeOver()
	}
	tx := s.begin()
	// The old attempt writes (a row of its own), and has lost its claim.
	if c, err := s.claimIn(tx, s.Records, "t1", "old-write", now.Add(time.Hour)); err != nil || !c.Won {
		t.Fatalf("old attempt's write: %+v %v", c, err)
	}
	if live {
		takeOver()
	}
	ok, err := s.Driver.Complete(s.ctx, tx, store.Completion{Ref: ref(s.Records, "t1", "k"), Attempt: 1,
		Status: record.StatusSucceeded, Response: []byte(`"old"`), At: s.now()})
	if ok || err != nil {
		t.Fatalf("old attempt completed: %v %v", ok, err)
	}
	if rec := s.lookup(s.Records, "t1", "old-write"); rec != nil {
		t.Fatalf("the old attempt's write survived: %+v", rec)
	}
	if s.complete(s.Records, "t1", "k", 1, record.StatusFailed, `"old again"`) {
		t.Fatal("old attempt completed by itself")
	}
	if !s.complete(s.Records, "t1", "k", 2, record.StatusSucceeded, `"new"`) {
		t.Fatal("the new attempt could not complete")
	}
	rec := s.lookup(s.Records, "t1", "k")
	if rec.Status != record.StatusSucceeded || string(rec.Response) != `"new"` || rec.Attempt != 2 || rec.CompletedAt.IsZero() {
		t.Fatalf("after completion: %+v", rec)
	}
	if s.complete(s.Records, "t1", "k", 2, record.StatusFailed, `"twice"`) {
		t.Fatal("a finished record completed again")
	}
}

func testRenewAndRelease(t *testing.T, s *suite) {
	now := s.now()
	s.claim(s.Records, "t1", "k", now.Add(time.Minute))
	r := ref(s.Records, "t1", "k")
	lease := func() time.Time { return s.lookup(s.Records, "t1", "k").LeaseExpiresAt }

	if ok, err := s.Driver.Renew(s.ctx, store.Lease{Ref: r, Attempt: 1, Until: now.Add(2 * time.Minute)}); !ok || err != nil {
		t.Fatalf("renew: %v %v", ok, err)
	}
	if !near(lease(), now.Add(2*time.Minute)) {
		t.Fatalf("renewed lease %v", lease())
	}
	if ok, err := s.Driver.Renew(s.ctx, store.Lease{Ref: r, Attempt: 2, Until: now.Add(time.Hour)}); ok || err != nil {
		t.Fatalf("renew by another attempt: %v %v", ok, err)
	}
	if err := s.Driver.Release(s.ctx, store.Lease{Ref: r, Attempt: 2, Until: now}); err != nil {
		t.Fatal(err)
	}
	if !near(lease(), now.Add(2*time.Minute)) {
		t.Fatalf("released by another attempt: lease %v", lease())
	}
	// A released claim is free at once.
	if err := s.Driver.Release(s.ctx, store.Lease{Ref: r, Attempt: 1, Until: now}); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.Driver.TakeOver(s.ctx, store.TakeOver{Ref: r, Attempt: 1, Now: now, LeaseUntil: now.Add(time.Minute)}); !ok || err != nil {
		t.Fatalf("take over a released claim: %v %v", ok, err)
	}
	if ok, err := s.Driver.Renew(s.ctx, store.Lease{Ref: r, Attempt: 1, Until: now.Add(time.Hour)}); ok || err != nil {
		t.Fatalf("renew by the attempt taken over: %v %v", ok, err)
	}
	s.complete(s.Records, "t1", "k", 2, record.StatusSucceeded, `"done"`)
	// A finished record's lease column is its promised expiry
	// (Completion.ExpiresAt): no renewal or release changes it.
	expiry := lease()
	if ok, err := s.Driver.Renew(s.ctx, store.Lease{Ref: r, Attempt: 2, Until: now.Add(time.Hour)}); ok || err != nil {
		t.Fatalf("renew a finished record: %v %v", ok, err)
	}
	if err := s.Driver.Release(s.ctx, store.Lease{Ref: r, Attempt: 2, Until: now.Add(-time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if !lease().Equal(expiry) {
		t.Fatalf("a finished record's expiry changed: %v, was %v", lease(), expiry)
	}
}

// atomicAttempt is an atomic-mode attempt that has claimed key k in its
// transaction, marked the savepoint, and written (a row of key "write").
func (s *suite) atomicAttempt() idembackend.Tx {
	s.t.Helper()
	now := s.now()
	tx := s.begin()
	if c, err := s.claimIn(tx, s.Records, "t1", "k", now.Add(time.Minute)); err != nil || !c.Won {
		s.t.Fatalf("claim: %+v %v", c, err)
	}
	if err := s.Driver.Savepoint(s.ctx, tx); err != nil {
		s.t.Fatal(err)
	}
	if c, err := s.claimIn(tx, s.Records, "t1", "write", now.Add(time.Hour)); err != nil || !c.Won {
		s.t.Fatalf("write: %+v %v", c, err)
	}
	return tx
}

// A completion in the attempt's transaction commits the resolver's writes
// with the result.
func testCompletionCommitsTheWrites(t *testing.T, s *suite) {
	tx := s.atomicAttempt()
	if s.lookup(s.Records, "t1", "k") != nil {
		t.Fatal("an uncommitted claim is visible")
	}
	ok, err := s.Driver.Complete(s.ctx, tx, store.Completion{Ref: ref(s.Records, "t1", "k"), Attempt: 1,
		Status: record.StatusSucceeded, Response: []byte(`"ok"`), At: s.now()})
	if !ok || err != nil {
		t.Fatalf("complete: %v %v", ok, err)
	}
	if rec := s.lookup(s.Records, "t1", "k"); rec == nil || rec.Status != record.StatusSucceeded {
		t.Fatalf("record: %+v", rec)
	}
	if s.lookup(s.Records, "t1", "write") == nil {
		t.Fatal("the write did not commit with the result")
	}
}

// Atomic mode's final failure: the writes after the savepoint are undone,
// the claim stays and stores the failure.
func testDiscardWrites(t *testing.T, s *suite) {
	tx := s.atomicAttempt()
	ok, err := s.Driver.Complete(s.ctx, tx, store.Completion{Ref: ref(s.Records, "t1", "k"), Attempt: 1,
		Status: record.StatusFailed, Response: []byte(`"no"`), At: s.now(), DiscardWrites: true})
	if !ok || err != nil {
		t.Fatalf("complete: %v %v", ok, err)
	}
	if rec := s.lookup(s.Records, "t1", "k"); rec == nil || rec.Status != record.StatusFailed || string(rec.Response) != `"no"` {
		t.Fatalf("record: %+v", rec)
	}
	if rec := s.lookup(s.Records, "t1", "write"); rec != nil {
		t.Fatalf("the discarded write committed: %+v", rec)
	}
}

// The sweeper forgets abandoned claims while requests take them over:
// each claim is taken over or deleted, never both, never neither.
func testPurgeRacesTakeovers(t *testing.T, s *suite) {
	const keys, batch = 12, 5
	now := s.now()
	for i := range keys {
		s.claim(s.Records, "t1", fmt.Sprint("k", i), now.Add(-2*time.Hour))
	}
	var took [keys]bool
	var purged atomic.Int32
	concurrently(keys+2, func(i int) {
		if i >= keys { // two sweepers
			for {
				n, err := s.Driver.PurgeAbandoned(s.ctx, store.AbandonedBatch{Table: s.Records.Table, LeaseEndedBefore: now.Add(-time.Hour), Limit: batch})
				if err != nil {
					t.Errorf("purge: %v", err)
					return
				}
				purged.Add(int32(n))
				if n < batch {
					return
				}
			}
		}
		ok, err := s.Driver.TakeOver(s.ctx, store.TakeOver{Ref: ref(s.Records, "t1", fmt.Sprint("k", i)), Attempt: 1, Now: now, LeaseUntil: now.Add(time.Minute)})
		if err != nil {
			t.Errorf("take over: %v", err)
		}
		took[i] = ok
	})
	gone := 0
	for i := range keys {
		rec := s.lookup(s.Records, "t1", fmt.Sprint("k", i))
		switch {
		case took[i] && (rec == nil || rec.Attempt != 2):
			t.Errorf("k%d was taken over, and then: %+v", i, rec)
		case !took[i] && rec != nil:
			t.Errorf("k%d was neither taken over nor purged: %+v", i, rec)
		case !took[i]:
			gone++
		}
	}
	if int(purged.Load()) != gone {
		t.Fatalf("the sweepers purged %d claims, %d are gone", purged.Load(), gone)
	}
	t.Logf("%d taken over, %d purged", keys-gone, gone)
}

// A tombstone past the horizon is purged while a request claims its key
// again: the claim loses to the tombstone (and the key is then forgotten),
// or wins after the purge; never a claim that is lost with the tombstone.
func testPurgeRacesAClaim(t *testing.T, s *suite) {
	const keys = 12
	now := s.now()
	for i := range keys {
		key := fmt.Sprint("k", i)
		s.claim(s.Records, "t1", key, now.Add(time.Minute))
		s.complete(s.Records, "t1", key, 1, record.StatusSucceeded, `"first"`)
	}
	if n, err := s.Driver.ArchiveBatch(s.ctx, store.ArchiveBatch{Table: s.Records.Table, Archive: s.Archive,
		CompletedBefore: now.Add(time.Hour), Now: now, Limit: keys}); n != keys || err != nil {
		t.Fatalf("archive: %d %v", n, err)
	}
	var won [keys]bool
	concurrently(keys+1, func(i int) {
		if i == keys {
			if _, err := s.Driver.PurgeBatch(s.ctx, store.PurgeBatch{Table: s.Records.Table, RecordOnly: true,
				ArchivedBefore: now.Add(time.Hour), Limit: keys}); err != nil {
				t.Errorf("purge: %v", err)
			}
			return
		}
		c, err := s.claimIn(nil, s.Records, "t1", fmt.Sprint("k", i), now.Add(time.Minute))
		switch {
		case err != nil:
			t.Errorf("claim: %v", err)
		case !c.Won && c.Holder != nil && c.Holder.ArchivedAt.IsZero():
			t.Errorf("k%d lost to a record that is not the tombstone: %+v", i, c.Holder)
		}
		won[i] = c.Won
	})
	// Whatever the purge left behind, a second one ends.
	if _, err := s.Driver.PurgeBatch(s.ctx, store.PurgeBatch{Table: s.Records.Table, RecordOnly: true,
		ArchivedBefore: now.Add(time.Hour), Limit: keys}); err != nil {
		t.Fatal(err)
	}
	for i := range keys {
		rec := s.lookup(s.Records, "t1", fmt.Sprint("k", i))
		switch {
		case won[i] && (rec == nil || rec.Status != record.StatusPending || !rec.ArchivedAt.IsZero()):
			t.Errorf("k%d: the new claim is gone: %+v", i, rec)
		case !won[i] && rec != nil:
			t.Errorf("k%d: the tombstone survived: %+v", i, rec)
		}
	}
}

// Several sweepers at once: every finished record is archived once and
// purged once, its response in its table or in the archive, never both,
// never neither; failed business rows are deleted, succeeded ones stay
// without their key.
func testSweepersMoveEachRowOnce(t *testing.T, s *suite) {
	const perTable, sweepers, batch = 30, 4, 7
	now := s.now()
	tables := []Table{s.Records, s.Business}
	for _, tb := range tables {
		for i := range perTable {
			key := fmt.Sprint("k", i)
			s.claim(tb, fmt.Sprint("t", i%3), key, now.Add(time.Minute))
			status := record.StatusSucceeded
			if i%5 == 0 {
				status = record.StatusFailed
			}
			s.complete(tb, fmt.Sprint("t", i%3), key, 1, status, fmt.Sprintf(`{"n":%d}`, i))
		}
	}
	cutoff := now.Add(time.Hour)
	// sweep runs step in sweepers at once, each until a batch finds
	// nothing, then once more alone: on InnoDB a locking read locks every
	// row its scan passes, not only its batch's, so concurrent sweepers
	// can all find nothing while rows remain for a later batch (the next
	// round of a real sweeper). What must hold is that no row is moved
	// twice and that a later sweep moves the rest.
	sweep := func(tb Table, step func() (int, error)) int {
		var total atomic.Int32
		drain := func() {
			for {
				n, err := step()
				if err != nil {
					t.Errorf("%s: %v", tb.Name, err)
					return
				}
				total.Add(int32(n))
				if n == 0 {
					return
				}
			}
		}
		concurrently(sweepers, func(int) { drain() })
		drain()
		return int(total.Load())
	}
	for _, tb := range tables {
		archive := store.ArchiveBatch{Table: tb.Table, Archive: s.Archive, CompletedBefore: cutoff, Now: now, Limit: batch}
		if n, err := s.Driver.ArchiveBatch(s.ctx, store.ArchiveBatch{Table: tb.Table, Archive: s.Archive, CompletedBefore: cutoff, DryRun: true}); n != perTable || err != nil {
			t.Fatalf("%s: dry run counts %d (%v), want %d", tb.Name, n, err, perTable)
		}
		if n := sweep(tb, func() (int, error) { return s.Driver.ArchiveBatch(s.ctx, archive) }); n != perTable {
			t.Fatalf("%s: archived %d, want %d", tb.Name, n, perTable)
		}
		for i := range perTable {
			s.requireArchivedOnce(tb, fmt.Sprint("t", i%3), fmt.Sprint("k", i), fmt.Sprintf(`{"n":%d}`, i))
		}
	}
	if n, _, err := s.Driver.ArchiveStats(s.ctx, s.Archive); n != 2*perTable || err != nil {
		t.Fatalf("the archive holds %d records (%v), want %d", n, err, 2*perTable)
	}
	for _, tb := range tables {
		purge := store.PurgeBatch{Table: tb.Table, RecordOnly: tb.Name == s.Records.Name, ArchivedBefore: cutoff, Limit: batch}
		if n := sweep(tb, func() (int, error) { return s.Driver.PurgeBatch(s.ctx, purge) }); n != perTable {
			t.Fatalf("%s: purged %d, want %d", tb.Name, n, perTable)
		}
		st, err := s.Driver.Stats(s.ctx, tb.Table)
		if err != nil || st != (store.TableStats{}) {
			t.Fatalf("%s after the purge: %+v %v", tb.Name, st, err)
		}
	}
	failed := perTable / 5
	for tb, want := range map[string]int{s.Records.Name: 0, s.Business.Name: perTable - failed} {
		if n, err := s.Count(s.ctx, tb); n != want || err != nil {
			t.Fatalf("%s: %d rows (%v), want %d", tb, n, err, want)
		}
	}
	if n, _, _ := s.Driver.ArchiveStats(s.ctx, s.Archive); n != 2*perTable {
		t.Fatalf("the purge changed the archive: %d records", n)
	}
}

// An archive batch narrowed to one mutation takes the records whose
// fingerprint names exactly that mutation (not one whose name it matches
// as a LIKE pattern, nor one it begins), completed in its band.
func testArchiveOneMutation(t *testing.T, s *suite) {
	now := s.now()
	fps := map[string]string{ // key: the mutation its fingerprint names
		"short-1": "Mutation.view_page", "short-2": "Mutation.view_page",
		"pattern": "Mutation.viewXpage", "longer": "Mutation.view_pages", "other": "Mutation.pay",
	}
	for key, field := range fps {
		if c, err := s.claimWith(nil, s.Records, "t", key, fingerprint.Prefix(field)+"args:sel", now.Add(time.Minute)); err != nil || !c.Won {
			t.Fatalf("claim %s: %+v %v", key, c, err)
		}
		s.complete(s.Records, "t", key, 1, record.StatusSucceeded, `{"k":"`+key+`"}`)
	}
	batch := store.ArchiveBatch{Table: s.Records.Table, Archive: s.Archive, FingerprintPrefix: fingerprint.Prefix("Mutation.view_page"),
		CompletedSince: now.Add(time.Hour), CompletedBefore: now.Add(2 * time.Hour), Now: now, Limit: 10}
	if n, err := s.Driver.ArchiveBatch(s.ctx, batch); n != 0 || err != nil {
		t.Fatalf("records completed before the band: archived %d (%v)", n, err)
	}
	batch.CompletedSince = now.Add(-time.Hour)
	dry := batch
	dry.DryRun = true
	if n, err := s.Driver.ArchiveBatch(s.ctx, dry); n != 2 || err != nil {
		t.Fatalf("dry run counts %d (%v), want 2", n, err)
	}
	if n, err := s.Driver.ArchiveBatch(s.ctx, batch); n != 2 || err != nil {
		t.Fatalf("archived %d (%v), want 2", n, err)
	}
	for key, field := range fps {
		if field == "Mutation.view_page" {
			s.requireArchivedOnce(s.Records, "t", key, `{"k":"`+key+`"}`)
		} else if rec := s.lookup(s.Records, "t", key); rec == nil || !rec.ArchivedAt.IsZero() {
			t.Fatalf("%s (%s) was archived: %+v", key, field, rec)
		}
	}
	// The table's own batch takes the rest.
	if n, err := s.Driver.ArchiveBatch(s.ctx, store.ArchiveBatch{Table: s.Records.Table, Archive: s.Archive,
		CompletedBefore: now.Add(time.Hour), Now: now, Limit: 10}); n != len(fps)-2 || err != nil {
		t.Fatalf("the table's batch archived %d (%v), want %d", n, err, len(fps)-2)
	}
}

// requireArchivedOnce fails the test unless the record of (tenant, key) is
// a tombstone in its table with its response in one archived copy.
func (s *suite) requireArchivedOnce(tb Table, tenant, key, response string) {
	s.t.Helper()
	rows, err := s.Driver.Find(s.ctx, store.FindQuery{Table: tb.Table, Archive: s.Archive, Tenant: tenant, Key: key})
	if err != nil || len(rows) != 2 {
		s.t.Fatalf("%s %s: %d rows (%v), want the tombstone and one archived copy", tb.Name, key, len(rows), err)
	}
	hot, cold := rows[0], rows[1]
	if hot.Archived || hot.ArchivedAt.IsZero() || len(hot.Response) != 0 || !cold.Archived || string(cold.Response) != response {
		s.t.Fatalf("%s %s: tombstone %+v, archived %+v", tb.Name, key, hot, cold)
	}
}

func testOperatorReads(t *testing.T, s *suite) {
	now := s.now()
	s.claim(s.Business, "t1", "stuck", now.Add(-time.Hour))
	s.claim(s.Business, "t1", "live", now.Add(time.Hour))
	s.claim(s.Business, "t1", "failed", now.Add(time.Hour))
	s.complete(s.Business, "t1", "failed", 1, record.StatusFailed, `"no"`)
	s.claim(s.Business, "t1", "ok", now.Add(time.Hour))
	s.complete(s.Business, "t1", "ok", 1, record.StatusSucceeded, `"yes"`)

	st, err := s.Driver.Stats(s.ctx, s.Business.Table)
	if err != nil || st.Pending != 2 || st.Succeeded != 1 || st.Failed != 1 || st.Tombstones != 0 || st.OldestPending.IsZero() {
		t.Fatalf("stats: %+v %v", st, err)
	}
	stuck, err := s.Driver.Stuck(s.ctx, store.StuckQuery{Table: s.Business.Table, LeaseEndedBefore: now, Limit: 10})
	if err != nil || len(stuck) != 1 || stuck[0].Key != "stuck" || stuck[0].Tenant != "t1" || stuck[0].Status != record.StatusPending ||
		!stuck[0].Recoverable {
		t.Fatalf("stuck: %+v %v", stuck, err)
	}
	failed, err := s.Driver.Failed(s.ctx, store.FailedQuery{Table: s.Business.Table, Limit: 10})
	if err != nil || len(failed) != 1 || failed[0].Key != "failed" || string(failed[0].Response) != `"no"` {
		t.Fatalf("failed: %+v %v", failed, err)
	}
	// Filtered by tenant and by completion time.
	for _, q := range []store.FailedQuery{
		{Tenant: "t1"}, {Since: now.Add(-time.Minute)}, {Until: now.Add(time.Minute)}, {Tenant: "t1", Since: now.Add(-time.Minute), Until: now.Add(time.Minute)},
	} {
		q.Table, q.Limit = s.Business.Table, 10
		if failed, err := s.Driver.Failed(s.ctx, q); err != nil || len(failed) != 1 || failed[0].Key != "failed" {
			t.Fatalf("failed %+v: %+v %v", q, failed, err)
		}
	}
	for _, q := range []store.FailedQuery{{Tenant: "t2"}, {Since: now.Add(time.Minute)}, {Until: now.Add(-time.Minute)}} {
		q.Table, q.Limit = s.Business.Table, 10
		if failed, err := s.Driver.Failed(s.ctx, q); err != nil || len(failed) != 0 {
			t.Fatalf("failed %+v: %+v %v", q, failed, err)
		}
	}
	// Finished records since a time, newest first: not the pending ones.
	completed, err := s.Driver.Completed(s.ctx, store.CompletedQuery{Table: s.Business.Table, Since: now.Add(-time.Minute), Limit: 10})
	if err != nil || len(completed) != 2 || completed[0].Key != "ok" || completed[1].Key != "failed" || string(completed[0].Response) != `"yes"` {
		t.Fatalf("completed: %+v %v", completed, err)
	}
	completed, err = s.Driver.Completed(s.ctx, store.CompletedQuery{Table: s.Business.Table, Since: now.Add(-time.Minute), Limit: 1})
	if err != nil || len(completed) != 1 || completed[0].Key != "ok" {
		t.Fatalf("completed, limit 1: %+v %v", completed, err)
	}
	if completed, err = s.Driver.Completed(s.ctx, store.CompletedQuery{Table: s.Business.Table, Since: s.now().Add(time.Minute), Limit: 10}); err != nil || len(completed) != 0 {
		t.Fatalf("completed since later: %+v %v", completed, err)
	}
	found, err := s.Driver.Find(s.ctx, store.FindQuery{Table: s.Business.Table, Archive: s.Archive, Tenant: "t1", Key: "ok"})
	// A finished record has forgotten its operation: it will not run again.
	if err != nil || len(found) != 1 || found[0].Status != record.StatusSucceeded || found[0].Attempt != 1 || found[0].CompletedAt.IsZero() ||
		found[0].Recoverable {
		t.Fatalf("find: %+v %v", found, err)
	}
	if err := s.Driver.Ping(s.ctx); err != nil {
		t.Fatalf("ping: %v", err)
	}
}

// abandoned lists the recoverer's turn of tb: the claims whose lease ended
// before cutoff, and those without an operation claimed before horizon.
func (s *suite) abandoned(tb Table, cutoff, horizon time.Time, limit int) []store.AbandonedClaim {
	s.t.Helper()
	got, err := s.Driver.Abandoned(s.ctx, store.AbandonedQuery{Table: tb.Table, LeaseEndedBefore: cutoff, ClaimedBefore: horizon, Limit: limit})
	if err != nil {
		s.t.Fatalf("%s: abandoned: %v", tb.Name, err)
	}
	return got
}

// keys lists the tenant/key of each claim, in order.
func keys(cs []store.AbandonedClaim) string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Tenant + "/" + c.Key
	}
	return strings.Join(out, " ")
}

// The recoverer's list: pending claims whose lease ended before the cutoff,
// each with the operation it kept; live, recent and finished claims are not
// in it, nor, until it was claimed before the horizon, a claim that kept no
// operation (nothing can run it: it would only take the place of one that
// can). Two recoverers that both list a claim race for it with the
// ordinary takeover: one wins.
func testAbandoned(t *testing.T, s *suite) {
	now := s.now()
	for _, tb := range []Table{s.Records, s.Business} {
		s.claim(tb, "t1", "older", now.Add(-2*time.Hour))
		s.claim(tb, "t2", "no-operation", now.Add(-90*time.Minute))
		s.claim(tb, "t1", "recent", now.Add(-time.Minute))
		s.claim(tb, "t1", "live", now.Add(time.Hour))
		s.claim(tb, "t1", "done", now.Add(-3*time.Hour))
		s.complete(tb, "t1", "done", 1, record.StatusFailed, `"no"`)

		cutoff, horizon := now.Add(-time.Hour), now.Add(-time.Hour)
		got := s.abandoned(tb, cutoff, horizon, 10)
		if len(got) != 1 {
			t.Fatalf("%s: abandoned %s, want older alone (no-operation was claimed after the horizon)", tb.Name, keys(got))
		}
		older := got[0]
		if older.Tenant != "t1" || older.Key != "older" || older.Fingerprint != "fp-older" || older.Attempt != 1 || string(older.Operation) != `{"query":"mutation { older }"}` ||
			!near(older.LeaseExpiresAt, now.Add(-2*time.Hour)) || older.ClaimedAt.IsZero() {
			t.Fatalf("%s: older %+v", tb.Name, older)
		}
		// Past the horizon, it is listed: to be abandoned.
		horizon = s.now().Add(time.Second)
		got = s.abandoned(tb, cutoff, horizon, 10)
		if keys(got) != "t1/older t2/no-operation" || got[1].Operation != nil {
			t.Fatalf("%s: abandoned past the horizon: %+v, want older and no-operation", tb.Name, got)
		}
		if got := s.abandoned(tb, cutoff, horizon, 1); len(got) != 1 {
			t.Fatalf("%s: limit 1: %s", tb.Name, keys(got))
		}

		var took atomic.Int32
		concurrently(4, func(int) {
			ok, err := s.Driver.TakeOver(s.ctx, store.TakeOver{Ref: ref(tb, "t1", "older"), Attempt: older.Attempt, Now: now, LeaseUntil: now.Add(time.Minute)})
			if err != nil {
				t.Errorf("take over: %v", err)
			}
			if ok {
				took.Add(1)
			}
		})
		if took.Load() != 1 {
			t.Fatalf("%s: %d recoverers took the claim over, want 1", tb.Name, took.Load())
		}
		if got := s.abandoned(tb, cutoff, horizon, 10); keys(got) != "t2/no-operation" {
			t.Fatalf("%s: after the takeover: %s", tb.Name, keys(got))
		}
	}
}

// The recoverer's list takes turns by tenant: each tenant's claims in the
// order their leases ended, and every tenant's first claim before any
// tenant's second, so that one tenant's many claims, older than everyone
// else's, do not keep another tenant's out of a batch. Claims without an
// operation take no place before the horizon.
func testAbandonedTurns(t *testing.T, s *suite) {
	now := s.now()
	tb := s.Records
	for i := range 5 {
		s.claim(tb, "busy", fmt.Sprintf("b%d", i+1), now.Add(time.Duration(i-10)*time.Hour))
		s.claim(tb, "busy", fmt.Sprintf("no-operation-%d", i+1), now.Add(time.Duration(i-20)*time.Hour))
	}
	s.claim(tb, "quiet", "q1", now.Add(-2*time.Hour))
	s.claim(tb, "quiet", "q2", now.Add(-90*time.Minute))
	s.claim(tb, "third", "x1", now.Add(-3*time.Hour))
	s.claim(tb, "third", "live", now.Add(time.Hour))

	cutoff, horizon := now.Add(-time.Hour), now.Add(-time.Hour)
	const all = "busy/b1 third/x1 quiet/q1 busy/b2 quiet/q2 busy/b3 busy/b4 busy/b5"
	if got := keys(s.abandoned(tb, cutoff, horizon, 100)); got != all {
		t.Fatalf("abandoned:\n got %s\nwant %s", got, all)
	}
	if got := keys(s.abandoned(tb, cutoff, horizon, 3)); got != "busy/b1 third/x1 quiet/q1" {
		t.Fatalf("abandoned, 3: %s, want every tenant's first", got)
	}
	// Past the horizon, the claims without an operation are listed too,
	// each in its tenant's turns.
	got := keys(s.abandoned(tb, cutoff, s.now().Add(time.Second), 4))
	if got != "busy/no-operation-1 third/x1 quiet/q1 busy/no-operation-2" {
		t.Fatalf("abandoned past the horizon, 4: %s", got)
	}
}

// A claim the recoverer did not run goes to the back of its list: its
// lease ends again now, after every other claim's, so that it leaves the
// list until the cutoff passes it again, and its client's retry still
// takes it over at once. The move is fenced: not when another attempt
// holds the claim or its lease was renewed since it was listed, and of
// concurrent recoverers, one moves it.
func testRequeue(t *testing.T, s *suite) {
	now := s.now()
	tb := s.Business
	s.claim(tb, "t1", "a", now.Add(-3*time.Hour))
	s.claim(tb, "t1", "b", now.Add(-2*time.Hour))
	s.claim(tb, "t1", "renewed", now.Add(-4*time.Hour))
	cutoff := now.Add(-time.Hour)
	if got := keys(s.abandoned(tb, cutoff, cutoff, 10)); got != "t1/renewed t1/a t1/b" {
		t.Fatalf("abandoned: %s", got)
	}
	requeue := func(key string, attempt int) bool {
		ok, err := s.Driver.Requeue(s.ctx, store.Requeue{Ref: ref(tb, "t1", key), Attempt: attempt, LeaseEndedBefore: cutoff, Now: s.now()})
		if err != nil {
			t.Fatalf("requeue %s: %v", key, err)
		}
		return ok
	}
	var moved atomic.Int32
	concurrently(4, func(int) {
		if requeue("a", 1) {
			moved.Add(1)
		}
	})
	if moved.Load() != 1 {
		t.Fatalf("%d recoverers moved a, want 1", moved.Load())
	}
	if got := keys(s.abandoned(tb, cutoff, cutoff, 10)); got != "t1/renewed t1/b" {
		t.Fatalf("abandoned after a moved back: %s", got)
	}
	if got := keys(s.abandoned(tb, s.now(), cutoff, 10)); got != "t1/renewed t1/b t1/a" {
		t.Fatalf("abandoned with a later cutoff: %s, want a last", got)
	}
	// Its lease has ended: a retry takes it over at once.
	if rec := s.lookup(tb, "t1", "a"); rec.Attempt != 1 || rec.LeaseExpiresAt.After(s.now()) {
		t.Fatalf("a after the move: %+v", rec)
	}
	if ok, err := s.Driver.TakeOver(s.ctx, store.TakeOver{Ref: ref(tb, "t1", "a"), Attempt: 1, Now: s.now(), LeaseUntil: s.now().Add(time.Minute)}); err != nil || !ok {
		t.Fatalf("take over a after the move: %v %v", ok, err)
	}
	// Another attempt holds b: not moved.
	if ok, err := s.Driver.TakeOver(s.ctx, store.TakeOver{Ref: ref(tb, "t1", "b"), Attempt: 1, Now: now, LeaseUntil: now.Add(-time.Hour - time.Minute)}); err != nil || !ok {
		t.Fatalf("take over b: %v %v", ok, err)
	}
	if requeue("b", 1) {
		t.Fatal("b moved back for an attempt that no longer holds it")
	}
	// A live attempt renewed its lease since it was listed: not moved.
	if ok, err := s.Driver.Renew(s.ctx, store.Lease{Ref: ref(tb, "t1", "renewed"), Attempt: 1, Until: now.Add(time.Hour)}); err != nil || !ok {
		t.Fatalf("renew: %v %v", ok, err)
	}
	if requeue("renewed", 1) {
		t.Fatal("a renewed lease was cut short")
	}
	if rec := s.lookup(tb, "t1", "renewed"); !near(rec.LeaseExpiresAt, now.Add(time.Hour)) {
		t.Fatalf("renewed: lease %v, want %v", rec.LeaseExpiresAt, now.Add(time.Hour))
	}
}

func testMissingTable(t *testing.T, s *suite) {
	missing := store.Table{Name: "no_such_records", Scope: "tenant_id", ID: "id"}
	_, _, err := s.Driver.Lookup(s.ctx, store.Ref{Table: missing, Tenant: "t1", Key: "k"})
	var se *store.Error
	if !errors.Is(err, store.ErrNoTable) || !errors.As(err, &se) || se.Detail == "" || se.Backend == "" {
		t.Fatalf("lookup in a missing table: %#v", err)
	}
	if _, err := s.Driver.Stats(s.ctx, missing); !errors.Is(err, store.ErrNoTable) {
		t.Fatalf("stats of a missing table: %v", err)
	}
}
