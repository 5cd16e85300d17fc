package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/goovo/idem/ent"
	"github.com/goovo/idem/graph"
	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/testkit"
	"github.com/goovo/idem/internal/testkit/proctest"
)

// On a mysql:// DATABASE_URL the example starts on MariaDB, makes its
// tables, and serves: an order, its payment (charged once, replayed to a
// retry), and the payment's receipt, delivered once through the example's
// receipt table (River does not run on MySQL).
func TestServerRunsOnMySQL(t *testing.T) {
	t.Parallel()
	bin := proctest.Build(t, ".")
	db := idemtest.Open(t, idemtest.MariaDB)
	env, args := serverDatabase(db)
	srv := startServer(t, bin, env, args)
	order := srv.newOrder(t, "acme", "order-1")
	for range 2 {
		if r := srv.pay("acme", "pay-1", order); len(r.Errors) > 0 || !strings.Contains(r.body, `"paid":true`) {
			t.Fatalf("payment: %s", r.body)
		}
	}
	var got []receipt
	testkit.Eventually(t, func() bool {
		got = receipts(t, srv, order)
		return len(got) > 0
	}, "the payment's receipt")
	if len(got) != 1 || got[0].Requests != 1 {
		t.Fatalf("receipts %+v, want one, requested once", got)
	}
	if !strings.Contains(srv.Output(), "database=mysql") {
		t.Fatalf("the start's log line does not name MySQL:\n%s", srv.Output())
	}
}

// A flag that only configures River is refused on MySQL, naming the flag
// and what the example uses there instead: silently ignored, it would
// promise a behaviour the server does not have.
func TestRiverFlagIsRefusedOnMySQL(t *testing.T) {
	t.Parallel()
	bin := proctest.Build(t, ".")
	for _, flag := range [][]string{{"-river-poll-only"}, {"-river-rescue-after", "5s"}, {"-db-driver", "pgx"}} {
		p := proctest.Start(t, bin, []string{"DATABASE_URL=mysql://root@127.0.0.1:3306/test"}, append([]string{"-addr", proctest.FreeAddr(t)}, flag...))
		select {
		case <-p.Done():
		case <-time.After(testkit.WaitBound):
			t.Fatalf("the server started on MySQL with %s:\n%s", flag, p.Output())
		}
		out := p.Output()
		if p.Wait() == nil || !strings.Contains(out, flag[0]) || !strings.Contains(out, "MySQL/MariaDB") {
			t.Fatalf("%s: exit %v, output:\n%s", flag, p.Wait(), out)
		}
	}
}

// With -migrate=false on MySQL, a database that has ent's tables but not
// the receipt table stops the start, naming the table and how to make it,
// and nothing is created.
func TestNoAutomaticMigrationOnMySQLNamesTheReceiptTable(t *testing.T) {
	t.Parallel()
	bin := proctest.Build(t, ".")
	db := idemtest.Open(t, idemtest.MariaDB)
	ctx := context.Background()
	if err := ent.NewClient(ent.Driver(db.Driver)).Schema.Create(ctx); err != nil {
		t.Fatal(err)
	}
	env, args := serverDatabase(db)
	p := proctest.Start(t, bin, env, append([]string{"-addr", proctest.FreeAddr(t), "-migrate=false"}, args...))
	select {
	case <-p.Done():
	case <-time.After(testkit.WaitBound):
		t.Fatalf("the server started without the receipt table:\n%s", p.Output())
	}
	if out := p.Output(); p.Wait() == nil || !strings.Contains(out, graph.ReceiptTable) || !strings.Contains(out, "graph.ReceiptTableSchema") {
		t.Fatalf("exit %v, output:\n%s", p.Wait(), out)
	}
	if _, err := db.Driver.DB().ExecContext(ctx, "SELECT 1 FROM "+graph.ReceiptTable); err == nil {
		t.Fatal("the server with -migrate=false created the receipt table")
	}
}
