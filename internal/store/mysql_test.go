package store_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/goovo/idem/idembackend"
	"github.com/goovo/idem/idemdb"
	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/store"
	"github.com/goovo/idem/internal/store/storetest"
	"github.com/goovo/idem/internal/testkit"
	"github.com/goovo/idem/internal/testkit/testapp/ent"
)

// mariaDBClaim claims key in tx (nil: by itself) on env's record table.
func mariaDBClaim(ctx context.Context, env *storetest.Env, tx idembackend.Tx, key string) (store.Claimed, error) {
	r, err := env.Driver.Now(ctx)
	if err != nil {
		return store.Claimed{}, err
	}
	now := r.Now()
	return env.Driver.Claim(ctx, store.Claim{
		Ref: store.Ref{Table: env.Records.Table, Tenant: "t", Key: key},
		Tx:  tx,
		Insert: func(ctx context.Context, tx idembackend.Tx) (bool, error) {
			return env.Records.Insert(ctx, tx, storetest.Claim{Tenant: "t", Key: key, Fingerprint: "fp", ClaimedAt: now, LeaseUntil: now.Add(time.Minute)})
		},
	})
}

// Keys are utf8mb4 and compared byte for byte, as on PostgreSQL: a key
// of four-byte characters is stored and found, keys that differ in case
// only are two keys, and bytes that are not UTF-8 are refused as text the
// database cannot store (the client's BAD_USER_INPUT), never stored
// mangled nor taken for an outage.
func TestMariaDBKeysAreUTF8MB4(t *testing.T) {
	t.Parallel()
	env := open(t, idemtest.MariaDB, false)
	ctx := context.Background()
	for _, key := range []string{"🔑-clé", "k", "K"} {
		c, err := mariaDBClaim(ctx, env, nil, key)
		if err != nil || !c.Won {
			t.Fatalf("claim %q: %+v %v", key, c, err)
		}
		rows, err := env.Driver.Find(ctx, store.FindQuery{Table: env.Records.Table, Tenant: "t", Key: key})
		if err != nil || len(rows) != 1 || rows[0].Key != key {
			t.Fatalf("find %q: %+v %v", key, rows, err)
		}
	}
	_, err := mariaDBClaim(ctx, env, nil, "k\xff\xfe")
	var se *store.Error
	if !errors.Is(err, store.ErrUnstorable) || !store.Unstorable(err) || !errors.As(err, &se) || se.Backend != "MySQL" {
		t.Fatalf("a key that is not UTF-8: %v", err)
	}
}

// A claim that waits past innodb_lock_wait_timeout for a transaction that
// holds its key is ErrLockTimeout (1205), never an answer.
func TestMariaDBLockWaitTimeout(t *testing.T) {
	t.Parallel()
	db, holder := mariaDBEnv(t)
	drv, err := idemdb.OpenSQL(db.DSN+"?innodb_lock_wait_timeout=1", idemdb.Pool{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { drv.Close() })
	waiter := envOf(t, db, ent.NewClient(ent.Driver(drv)).IdempotencyBackend())

	ctx := context.Background()
	_, tx, err := holder.Driver.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback() })
	if c, err := mariaDBClaim(ctx, holder, tx, "k"); err != nil || !c.Won {
		t.Fatalf("claim in a transaction: %+v %v", c, err)
	}
	_, err = mariaDBClaim(ctx, waiter, nil, "k")
	if !errors.Is(err, store.ErrLockTimeout) {
		t.Fatalf("a claim that waited past the lock timeout: %v", err)
	}
}

// Two transactions that claim two keys in opposite orders deadlock:
// InnoDB rolls one back (1213), which is ErrConflict (the request is
// answered as unavailable and retried), and the other goes on to win
// both keys.
func TestMariaDBDeadlockIsErrConflict(t *testing.T) {
	t.Parallel()
	_, env := mariaDBEnv(t)
	ctx := context.Background()
	_, a, err := env.Driver.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Rollback() })
	_, b, err := env.Driver.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Rollback() })
	for tx, key := range map[idembackend.Tx]string{a: "x", b: "y"} {
		if c, err := mariaDBClaim(ctx, env, tx, key); err != nil || !c.Won {
			t.Fatalf("claim %s: %+v %v", key, c, err)
		}
	}
	// Whichever claim waits first, the second closes the cycle, and InnoDB
	// picks one victim when it does: no order to arrange.
	var wg sync.WaitGroup
	var errA, errB error
	wg.Go(func() { _, errA = mariaDBClaim(ctx, env, a, "y") }) // waits for b
	wg.Go(func() { _, errB = mariaDBClaim(ctx, env, b, "x") }) // waits for a
	wg.Wait()
	if !(errors.Is(errA, store.ErrConflict) != errors.Is(errB, store.ErrConflict)) {
		t.Fatalf("want exactly one deadlock victim: a %v, b %v", errA, errB)
	}
	var se *store.Error
	if victim := errors.Join(errA, errB); !errors.As(victim, &se) || !strings.Contains(se.Detail, "Deadlock") {
		t.Fatalf("the victim's detail: %v", victim)
	}
}

// mariaDBEnv makes the test application's tables in a fresh MariaDB
// database and returns it and the store driver on it.
func mariaDBEnv(t *testing.T) (*idemtest.DB, *storetest.Env) {
	db := idemtest.Open(t, idemtest.MariaDB)
	client := ent.NewClient(ent.Driver(db.Driver))
	testkit.Setup(t, db, client.IdempotencyBackend(), client.Schema.Create)
	return db, envOf(t, db, client.IdempotencyBackend())
}
