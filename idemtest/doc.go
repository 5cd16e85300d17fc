// Package idemtest helps applications test their idempotent mutations
// against real databases: a fresh, isolated database per test on SQLite,
// PostgreSQL, or PostgreSQL with the tables hash-partitioned by tenant, and
// the list of kinds of database to run a suite on.
//
//	for _, kind := range idemtest.Kinds() {
//		t.Run(string(kind), func(t *testing.T) {
//			db := idemtest.Open(t, kind)
//			client := ent.NewClient(ent.Driver(db.Driver))
//			if err := db.Setup(ctx, client.IdempotencyBackend(), client.Schema.Create); err != nil {
//				t.Fatal(err)
//			}
//			...
//		})
//	}
//
// Connect and DB.Close do the same without a testing.TB, for a TestMain
// that shares one database among the tests of a package.
//
// RequireState asserts what a mutation left in the database (a key
// pending, succeeded, failed, or archived to a tombstone); Outcome,
// RequireExecuted and RequireReplayed read what a response says happened.
// To move the idempotency clock (lease expiry, retention), give the hook an
// idem.ClockOffset in idem.Config.Clock and Advance it.
//
// PostgreSQL tests read TEST_DATABASE_URL (default
// postgres://postgres@127.0.0.1:5432/test?sslmode=disable). A database that
// cannot be reached fails the test: it is never skipped.
package idemtest
