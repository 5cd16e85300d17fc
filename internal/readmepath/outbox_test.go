package readmepath

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/testkit/proctest"
)

// deliveryBound is the contract's bound: an effect whose delivery a crash
// interrupted is delivered within 30 s of the restart. The test waits
// longer, to report how long it took.
const deliveryBound = 30 * time.Second

// delivery is one webhook request the receiver got.
type delivery struct {
	key  string // its Idempotency-Key header: the job's downstream key
	body []byte
}

// receiver stands for the service the outbox guide's webhook goes to.
type receiver struct {
	url  string
	got  chan delivery // the deliveries it answered (204)
	hold atomic.Bool   // set: the next delivery is held, unanswered, until its client is gone
	held chan delivery // the delivery it holds
}

func newReceiver(t *testing.T) *receiver {
	t.Helper()
	r := &receiver{got: make(chan delivery, 16), held: make(chan delivery, 1)}
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return
		}
		d := delivery{key: req.Header.Get("Idempotency-Key"), body: body}
		if r.hold.CompareAndSwap(true, false) {
			r.held <- d
			select {
			case <-req.Context().Done(): // the worker died
			case <-stop:
			}
			return
		}
		r.got <- d
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(stop) }) // runs first: no handler is left waiting
	r.url = srv.URL
	return r
}

// next waits for the receiver's next answered delivery.
func (r *receiver) next(t *testing.T, timeout time.Duration) delivery {
	t.Helper()
	select {
	case d := <-r.got:
		return d
	case <-time.After(timeout):
		t.Fatalf("no webhook delivered within %v", timeout)
		return delivery{}
	}
}

// startWorker starts the outbox guide's worker and waits until River runs.
func startWorker(t *testing.T, app string, env []string) *proctest.Process {
	t.Helper()
	p := proctest.Start(t, filepath.Join(app, "worker"), env, nil)
	for deadline := time.Now().Add(time.Minute); !strings.Contains(p.Output(), "worker: started"); {
		if p.Exited() {
			t.Fatalf("the worker exited before it started: %v\n%s", p.Wait(), p.Output())
		}
		if time.Now().After(deadline) {
			t.Fatalf("the worker did not start within a minute:\n%s", p.Output())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return p
}

// webhookAfterACrash runs the outbox guide's app on PostgreSQL: publishBook
// sent twice with one key sends one webhook, with a downstream key; a
// worker killed while the receiver holds a delivery delivers it again, with
// the same key, once it is started again; and a worker stopped by SIGTERM
// stops River before its pool closes.
func webhookAfterACrash(t *testing.T, app string) {
	db := idemtest.Open(t, idemtest.Postgres)
	rcv := newReceiver(t)
	workerEnv := []string{"DATABASE_URL=" + db.DSN, "WEBHOOK_URL=" + rcv.url}
	worker := startWorker(t, app, workerEnv) // it migrates River's tables
	addr := proctest.FreeAddr(t)
	server := proctest.Start(t, filepath.Join(app, "server"), []string{"DATABASE_URL=" + db.DSN, "ADDR=" + addr}, nil)
	server.WaitListening(t, addr, time.Minute)
	url := "http://" + addr + "/query"

	created := post(t, url, "acme", `mutation { createBook(idempotencyKey: "o-1", input: {title: "Dune"}) { id } }`, nil)
	var b struct{ CreateBook struct{ ID string } }
	if err := json.Unmarshal(created.Data, &b); err != nil || b.CreateBook.ID == "" {
		t.Fatalf("createBook: %s", created.body)
	}
	publish := `mutation($key: String!, $book: ID!) { publishBook(idempotencyKey: $key, bookID: $book) }`
	vars := func(key string) map[string]any { return map[string]any{"key": key, "book": b.CreateBook.ID} }

	idemtest.RequireExecuted(t, post(t, url, "acme", publish, vars("p-1")).body, "publishBook")
	idemtest.RequireReplayed(t, post(t, url, "acme", publish, vars("p-1")).body, "publishBook")
	first := rcv.next(t, time.Minute)
	if first.key == "" || !strings.Contains(string(first.body), b.CreateBook.ID) {
		t.Errorf("the webhook has no downstream key or not the book: key %q, body %s", first.key, first.body)
	}

	// kill -9 while the receiver holds the next delivery.
	rcv.hold.Store(true)
	idemtest.RequireExecuted(t, post(t, url, "acme", publish, vars("p-2")).body, "publishBook")
	var held delivery
	select {
	case held = <-rcv.held:
	case <-time.After(time.Minute):
		t.Fatalf("the second webhook never reached the receiver:\n%s", worker.Output())
	}
	if held.key == "" || held.key == first.key {
		t.Errorf("the second key's webhook has downstream key %q, the first's %q: want another", held.key, first.key)
	}
	if !worker.Kill(t) {
		t.Fatalf("the worker exited before kill -9: %v\n%s", worker.Wait(), worker.Output())
	}
	restarted := time.Now()
	worker = startWorker(t, app, workerEnv)
	// Delivery is at least once: the first webhook may come again, with
	// its own key, when the worker died before River recorded its job
	// done (River completes jobs in batches); the receiver deduplicates
	// it by that key. Any other key is a fault.
	again := rcv.next(t, 3*time.Minute)
	for again.key == first.key && again.key != held.key {
		t.Logf("the first webhook came again after the restart, with its key %q", again.key)
		again = rcv.next(t, 3*time.Minute)
	}
	took := time.Since(restarted)
	if again.key != held.key {
		t.Errorf("after the restart a webhook with key %q, want the interrupted one's %q", again.key, held.key)
	}
	t.Logf("the webhook interrupted by kill -9 arrived %.1fs after the worker's restart", took.Seconds())
	if took > deliveryBound {
		t.Errorf("the webhook interrupted by kill -9 arrived %.1fs after the restart, past the contract's %v (the guide's RescueStuckJobsAfter?)", took.Seconds(), deliveryBound)
	}

	// One job per key, whatever the replays and the crash.
	var jobs int
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := db.Driver.DB().QueryRowContext(ctx, `SELECT count(*) FROM river_job WHERE kind = 'book_published'`).Scan(&jobs); err != nil {
		t.Fatal(err)
	}
	if jobs != 2 {
		t.Errorf("%d book_published jobs for two keys, want 2", jobs)
	}

	// Stopped, River resigns while the pool is open.
	worker.Signal(t, syscall.SIGTERM)
	if err := worker.Wait(); err != nil || strings.Contains(worker.Output(), "pool is closed") {
		t.Errorf("the worker's stop: %v\n%s", err, worker.Output())
	}
}
