// Package pgxdriver is an ent driver (entgo.io/ent/dialect.Driver) that runs
// ent's statements on PostgreSQL through pgx (pgxpool) directly, without
// database/sql, so that statements can share round trips:
//
//	drv, err := pgxdriver.Open("postgres://app@db:5432/app")
//	client := ent.NewClient(ent.Driver(drv))
//
// (idemdb.Open opens it for a postgres:// URL, with the pool settings the
// framework uses.) Its connections send ent's UUID ids as sixteen bytes
// (RegisterUUID); a pool of your own given to New needs RegisterUUID in
// its AfterConnect for that, or pgx sends them as text, at some twenty
// allocations each.
//
// A round trip to PostgreSQL costs more than the work of most of the
// framework's statements: BEGIN, SAVEPOINT and COMMIT each cost one through
// database/sql, which sends one statement at a time. This driver pipelines
// them (pgx batches: several statements written at once, one Sync) with
// the statements they precede. It is the connection layer under the
// pipelined store of the idempotency hook; BENCHMARKS.md has the figures.
//
// # Transactions
//
// A transaction (Tx, from client.Tx or client.BeginTx) takes a connection
// from the pool with its first statement and sends BEGIN in the same round
// trip: a transaction costs no round trip of its own, and one that sends
// nothing costs nothing. The idempotency hook's store queues its own
// statements ahead of the transaction's next one, COMMIT included: a
// SAVEPOINT goes with the resolver's first write, the completion's UPDATE
// with COMMIT (how is internal to the module). Tx.SendBatch sends the
// caller's own batch, with what is queued, when it needs results in the
// middle of a transaction.
//
// # Outside transactions
//
// Outside a transaction each statement takes a pooled connection and gives
// it back; the hook's claim carries its lookup in the round trip of ent's
// generated insert. Driver.SendBatch sends a batch of the caller's own, in
// one implicit transaction: its statements commit together or not at all.
//
// # database/sql
//
// ent reads rows as *sql.Rows, which only database/sql can make (ent's
// migrations, through Atlas, insist on them): the rows of a query, read by
// pgx in its round trip, reach ent through a small database/sql driver of
// this package that hands them out, with the values pgx's own database/sql
// driver gives, so client.Schema.Create runs on this driver. DB returns a
// database/sql view of the same pool (stdlib.OpenDBFromPool), within the
// same bound, for any library that takes a *sql.DB. QueryContext, ent's
// raw query (the sql/execquery feature), returns *sql.Rows: outside a
// transaction the rows of pgx's round trip, handed out as a query's are,
// inside one through a database/sql driver over the transaction's
// connection.
//
// ent's entsql.WithVar (session variables set before each statement) is
// not seen by this driver: its context key is unexported. Set variables
// with SET LOCAL in a transaction instead.
//
// # Pool and failures
//
// The pool is pgxpool's, bounded by its MaxConns (pool_max_conns in the
// URL): a statement, or a transaction's first statement, waits for a
// connection under its context. pgxpool pings a connection that sat idle
// for over a second before handing it out (one more round trip, as pgx's
// database/sql driver does), and replaces dead connections.
//
// As with database/sql, a transaction whose context ends before Commit is
// rolled back and its connection returned. A connection whose state is
// unknown is never returned to the pool: one whose statement was cut off by
// a cancellation is closed by pgx, and pgxpool destroys a connection that
// is closed, busy, or still in a transaction when it is released. A
// statement whose connection turned out dead before anything was sent is
// tried again on another connection, as database/sql does; a transaction
// whose connection breaks fails, and Commit reports it.
//
// # Statement caches and PgBouncer
//
// pgx's default query mode prepares each statement on each connection the
// first time it runs there (one more round trip, then cached), batches
// included. Behind PgBouncer in transaction pooling mode, prepared
// statements do not survive the transaction: use default_query_exec_mode=exec
// (or simple_protocol) in the URL; batches then still take one round trip.
// Deferred BEGIN suits PgBouncer: the transaction holds a server connection
// from its first statement, as it would anyway.
package pgxdriver
