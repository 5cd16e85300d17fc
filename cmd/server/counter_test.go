package main

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/testkit"
	"github.com/goovo/idem/internal/testkit/proctest"
)

// The article's counter under duress: 1,000 page views, 300 of them
// retries of an earlier view's key, sent concurrently to one server while a
// second process, which works the fold jobs River's leader enqueues (a
// periodic job, every 2ms; on MariaDB every server folds on its own 2ms
// ticker), is killed with SIGKILL and restarted several times. The count
// equals the number of distinct keys.
func TestPageViewCountSurvivesAKilledMaterializer(t *testing.T) {
	bin := proctest.Build(t, ".")
	// Not partitioned PostgreSQL: the servers make their own tables with
	// ent's Schema.Create (see TestKilledServerIsRecovered).
	for _, b := range []idemtest.Kind{idemtest.SQLite, idemtest.Postgres, idemtest.MariaDB} {
		t.Run(string(b), func(t *testing.T) {
			t.Parallel()
			db := idemtest.Open(t, b)
			env, args := serverDatabase(db)
			// Small batches, often: the kills land between and inside folds.
			// Every server has the same periodic job: whichever leads
			// enqueues it.
			folder := append(args, "-materialize-every", "2ms", "-materialize-batch", "15")
			folder = append(folder, onRiver(b, "-river-poll-interval", "20ms")...)
			web := startServer(t, bin, env, folder)

			const views, duplicates = 1000, 300
			keys := make([]string, 0, views)
			for i := range views - duplicates {
				keys = append(keys, fmt.Sprintf("view-%d", i))
			}
			for range duplicates {
				keys = append(keys, keys[rand.IntN(views-duplicates)])
			}
			rand.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })

			done := make(chan struct{})
			var failed sync.Map
			go func() {
				defer close(done)
				var wg sync.WaitGroup
				work := make(chan string)
				for range 16 {
					wg.Go(func() {
						for k := range work {
							r, err := web.do("acme", `mutation($k: String) { recordPageView(idempotencyKey: $k, page: "/launch") }`, map[string]any{"k": k})
							if err != nil || len(r.Errors) > 0 || !strings.Contains(r.body, `"recordPageView":true`) {
								failed.Store(k, fmt.Sprint(err, r))
							}
						}
					})
				}
				for _, k := range keys {
					work <- k
				}
				close(work)
				wg.Wait()
			}()

			kills := 0
			for sending := true; sending; {
				m := startServer(t, bin, env, folder)
				select {
				case <-done:
					sending = false
				case <-time.After(time.Duration(50+rand.IntN(150)) * time.Millisecond):
				}
				m.Kill(t)
				kills++
			}
			failed.Range(func(k, v any) bool {
				t.Errorf("view %v: %v", k, v)
				return true
			})

			// A last materializer, left to finish.
			startServer(t, bin, env, folder)
			distinct := views - duplicates
			var got string
			for deadline := time.Now().Add(testkit.WaitBound); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
				r, err := web.do("acme", `{ pageViews(page: "/launch") }`, nil)
				if err != nil {
					t.Fatal(err)
				}
				got = string(r.Data)
				if got == fmt.Sprintf(`{"pageViews":%d}`, distinct) {
					break
				}
			}
			if got != fmt.Sprintf(`{"pageViews":%d}`, distinct) {
				t.Fatalf("count %s, want %d distinct keys", got, distinct)
			}
			// And it stays there: nothing is counted twice later.
			time.Sleep(200 * time.Millisecond)
			if r, _ := web.do("acme", `{ pageViews(page: "/launch") }`, nil); string(r.Data) != got {
				t.Fatalf("count moved on to %s", r.Data)
			}
			t.Logf("%s: %d views (%d distinct keys), materializer killed %d times, count %s", b, views, distinct, kills, got)
		})
	}
}
