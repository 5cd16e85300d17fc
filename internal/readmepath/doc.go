// Package readmepath holds the test that follows the README's "Add it to
// your app" as a newcomer would: it takes every block the README marks
// with a file name (<!-- file: PATH -->) and every command block
// (<!-- commands -->), in the README's order, into a brand-new module in a
// temporary directory, with a schema of its own (testdata), runs the
// commands (go get, go mod tidy, go generate), builds the server and sends
// mutations twice, on SQLite and on PostgreSQL: the second answer must be
// a replay. The README cannot drift from what works.
package readmepath
