// Package idemdb opens the two databases the framework supports, configured
// the way the claim protocol needs them, as ent drivers:
//
//	drv, err := idemdb.Open("postgres://postgres@127.0.0.1:5432/app")
//	drv, err := idemdb.Open("sqlite:app.db") // or just "app.db"
//	client := ent.NewClient(ent.Driver(drv))
//
// PostgreSQL goes through pgx itself (package pgxdriver, on a pgxpool): an ent
// driver whose transactions send BEGIN with their first statement and can
// carry other statements in their round trips. On it the hook's store
// pipelines its statements: an idempotent create costs two round trips
// instead of five (BENCHMARKS.md). OpenSQL opens PostgreSQL on database/sql
// instead, one statement per round trip. SQLite is the embedded, pure-Go
// modernc.org/sqlite, opened in WAL mode with immediate
// transactions, a busy timeout and foreign keys on: without immediate
// transactions concurrent claims fail with SQLITE_BUSY instead of waiting.
//
// # Connections
//
// Open's pool has at most DefaultMaxConns connections; OpenPool takes a
// Pool of another size. A request that finds every connection in use waits
// for one as long as its context allows. WaitReady, at start, waits for a
// database that is down, restarting or full, for a bounded time.
//
// Behind PgBouncer in transaction pooling mode, add
// default_query_exec_mode=exec to the URL: pgx's default prepared-statement
// cache does not survive a pooler that hands each transaction another
// server connection (docs/operations.md, "Connections, start-up and PgBouncer").
//
// Opening a database sits below the record store (internal/store uses
// pgxdriver); turning a schema's tables into tables partitioned by tenant
// is an operator's step above the hook: idempartition.ByTenant.
package idemdb
