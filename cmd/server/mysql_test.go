package main

import (
	"strings"
	"testing"
	"time"

	"github.com/goovo/idem/internal/testkit"
	"github.com/goovo/idem/internal/testkit/proctest"
)

// On a MySQL or MariaDB URL the example refuses to start, and says why
// and what to use instead: its outbox runs on River, which has no MySQL
// driver; half a server (payments without their receipts) would be worse.
func TestMySQLURLIsRefusedAtStart(t *testing.T) {
	t.Parallel()
	bin := proctest.Build(t, ".")
	p := proctest.Start(t, bin, []string{"DATABASE_URL=mysql://root@127.0.0.1:3306/test"}, []string{"-addr", proctest.FreeAddr(t)})
	select {
	case <-p.Done():
	case <-time.After(testkit.WaitBound):
		t.Fatalf("the server started on MySQL:\n%s", p.Output())
	}
	out := p.Output()
	if p.Wait() == nil || !strings.Contains(out, "River has no MySQL driver") || !strings.Contains(out, "docs/mysql.md") {
		t.Fatalf("exit %v, output:\n%s", p.Wait(), out)
	}
}
