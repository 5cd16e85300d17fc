// Package idemctl is the operator's side of the idempotency records: the
// [Admin] of an [idem.Hook] (New), which maintains the records with the
// hook's retention, horizon, lease and clock (the retention sweep, and
// what one key holds, which claims are stuck, which intents failed, what
// the recoverer finished, how many records each table holds); and a
// command line over the Admin ([Command]). Partitioning a
// PostgreSQL schema by tenant is package idempartition's.
//
// Only the application can import its generated ent package, so the
// command is a library that an application embeds in a main of its own:
//
//	package main // cmd/idemctl of your application
//
//	func main() {
//		drv, err := idemdb.Open(os.Getenv("DATABASE_URL"))
//		if err != nil {
//			log.Fatal(err)
//		}
//		client := ent.NewClient(ent.Driver(drv)) // your ent package; import its ent/runtime too
//		cmd := idemctl.Command{
//			Config: appConfig(client), // the server's idem.Config (Tenant is not needed)
//			Schema: graph.NewExecutableSchema(graph.Config{}), // each mutation's own retention
//		}
//		os.Exit(cmd.Run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
//	}
//
// Command.Flags adds flags of the application's own (a -db flag, say) and
// Command.Open opens the database only when a command needs it; the
// example application's cmd/idemctl does both.
//
// # Commands
//
//	idemctl [global flags] <command> [flags]
//
//	inspect -tenant T -key K       every record of a key, in every record table and in the archive
//	stuck [-older D] [-limit N]    pending claims whose lease ran out long ago (default older: 3 leases)
//	failed [-limit N]              records that hold a final error
//	recovered [-table T] [-since D] [-limit N]
//	                               records the recoverer finished instead of their client
//	stats                          records by state per entity, the oldest pending claim, the archive's size
//	outbox                         the outbox's River jobs per kind: waiting (running, retrying), failed for good, the oldest waiting's age
//	sweep [-dry-run] [-batch N] [-pause D]
//	                               archive responses past retention, purge tombstones past the horizon
//
// Global flags: -json (one JSON document on stdout instead of text),
// -retention, -horizon and -lease (the hook's idem.Config by default; they
// must match the server's, since the sweep expires records by them;
// durations are written like 90s, 24h or 30d). Every command has -h.
//
// Text output is aligned for reading; times are RFC 3339 in UTC, durations
// are written like 3m12s or 2d4h. Messages, and the progress of a long
// sweep, go to stderr, one line each.
//
// # Exit codes
//
//	0  the command did what was asked
//	1  a runtime failure: inspect found no record of the key, the database
//	   cannot be reached or failed, a sweep was interrupted
//	2  a usage error: unknown command or flag, a missing or malformed
//	   argument (the key is checked like the hook checks it)
//
// # Retention, for clients
//
// A finished record replays its response for the retention window (24 h by
// default; an entity's idemschema.Retention; a mutation's
// @idempotent(retentionSeconds:), within its entity's), and every answer
// that holds a result says until when (extensions.idempotency's
// expiresAt). Past it the key answers IDEMPOTENCY_KEY_EXPIRED and never
// runs again; the sweep moves the response to the archive and leaves a
// tombstone, once the mutation's window has passed when it knows the
// GraphQL schema (Command.Schema), else once the entity's has. A tombstone
// horizon (30 days) after that the sweep purges the tombstone: the key is
// forgotten and would run as a new intent, so clients must not retry
// intents that old. The archive is never purged.
package idemctl
