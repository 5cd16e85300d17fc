// Package readmepath holds the test that follows "Add it to your app" in
// docs/adopting.md, then docs/guide/metrics.md (the metrics and an idemctl
// added to its minimal server), as a newcomer would: it takes every block
// the guides mark
// with a file name (<!-- file: PATH -->) and every command block
// (<!-- commands -->), in the guide's order, into a brand-new module in a
// temporary directory, with a schema of its own (testdata), runs the
// commands (go get, go mod tidy, go generate), builds the server and sends
// mutations twice, on SQLite, PostgreSQL and MariaDB: the second answer must be
// a replay. It then follows docs/outbox.md's marked blocks in the same
// module (a mutation that enqueues a webhook, a worker process on River)
// and runs them on PostgreSQL, with a receiver: one webhook per key, with
// its downstream key, and one interrupted by kill -9 of the worker
// delivered again after its restart. The guides cannot drift from what
// works. No other document may carry marked blocks (they would not be
// followed), and every relative link of README.md and docs/*.md must lead
// to a file and heading that exist.
package readmepath
