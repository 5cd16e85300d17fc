package readmepath

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/goovo/idem/idemcode"
	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/testkit/proctest"
)

// guide is the file whose marked blocks the test follows first: the
// adoption guide's "Add it to your app", relative to the module's root.
const guide = "docs/adopting.md"

// metricsGuide is the topic page whose marked blocks add the metrics and
// an idemctl to the guide's minimal server: they are followed right after
// guide's, in the same module.
const metricsGuide = "docs/guide/metrics.md"

// outboxGuide is the file whose marked blocks extend the adoption guide's
// app with the outbox: they are followed after guide's, in the same module.
const outboxGuide = "docs/outbox.md"

// step is one marked block of the guide: a file to write or commands to
// run, in the guide's order.
type step struct {
	file     string   // path in the module, for a file block
	content  string   // the file's text
	commands []string // for a command block, one command a line
	line     int      // where the block starts in the guide
}

var (
	fileMarker    = regexp.MustCompile(`^<!-- file: (\S+) -->$`)
	commandMarker = regexp.MustCompile(`^<!-- commands -->$`)
)

// markedSteps returns the marked blocks of the file at path, in order. A
// marker must be followed by a fenced block.
func markedSteps(t *testing.T, path string) []step {
	t.Helper()
	name := filepath.Base(path)
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var steps []step
	sc := bufio.NewScanner(bytes.NewReader(text))
	n := 0
	next := func() (string, bool) {
		if !sc.Scan() {
			return "", false
		}
		n++
		return sc.Text(), true
	}
	for {
		l, ok := next()
		if !ok {
			break
		}
		m := fileMarker.FindStringSubmatch(l)
		if m == nil && !commandMarker.MatchString(l) {
			continue
		}
		start := n
		fence, ok := next()
		if !ok || !strings.HasPrefix(fence, "```") {
			t.Fatalf("%s:%d: a marker must be followed by a fenced block, found %q", name, start, fence)
		}
		var body []string
		for {
			l, ok := next()
			if !ok {
				t.Fatalf("%s:%d: unterminated block", name, start)
			}
			if l == "```" {
				break
			}
			body = append(body, l)
		}
		s := step{line: start}
		if m != nil {
			s.file, s.content = m[1], strings.Join(body, "\n")+"\n"
		} else {
			for _, c := range body {
				if c = strings.TrimSpace(c); c != "" && !strings.HasPrefix(c, "#") {
					s.commands = append(s.commands, c)
				}
			}
		}
		steps = append(steps, s)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return steps
}

// TestReadmePath builds the app the guide's "Add it to your app" describes,
// in a new module whose schema is testdata's, and checks that a mutation
// sent twice is executed once and replayed once, on SQLite, PostgreSQL and
// MariaDB (a database of its own on TEST_MYSQL_URL's server); then it
// follows the outbox guide in the same module and runs its webhook through
// a kill -9 of the worker on PostgreSQL (webhookAfterACrash).
//
// The module cache is the only source of modules it needs once warm:
// GOFLAGS is cleared of the caller's -mod, GOSUMDB is off (the cache
// verified the modules when it was filled; a temporary module has no
// go.sum of its own to check against), GOPROXY is the environment's, so a
// cold cache fills from the module proxy. The guide's one step that
// cannot run as written, `go get github.com/goovo/idem@latest`, runs
// against this checkout: a replace directive, then go get of it.
func TestReadmePath(t *testing.T) {
	start := time.Now()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	app := appDir(t, root)
	goVersion := goDirective(t, filepath.Join(root, "go.mod"))
	writeFile(t, app, "go.mod", "module example.com/app\n\ngo "+goVersion+"\n")
	// The app's schema: what the guide shows only in part (a user's
	// entities, with the mixin the guide shows).
	copyTree(t, "testdata/ent", filepath.Join(app, "ent"))
	follow(t, root, app, guide)
	// The getting started's server, minimal (no metrics): kept to run once
	// the topic page has rebuilt it with them.
	minimal := filepath.Join(app, "server-minimal")
	if err := os.Rename(filepath.Join(app, "server"), minimal); err != nil {
		t.Fatalf("%s builds no server: %v", guide, err)
	}
	follow(t, root, app, metricsGuide)
	t.Logf("generated and built in %.1fs", time.Since(start).Seconds())
	bin := filepath.Join(app, "server")
	idemctl := filepath.Join(app, "idemctl")

	t.Run("minimal", func(t *testing.T) {
		addr := proctest.FreeAddr(t)
		p := proctest.Start(t, minimal, []string{"DATABASE_URL=" + filepath.Join(t.TempDir(), "app.db"), "ADDR=" + addr}, nil)
		p.WaitListening(t, addr, time.Minute)
		sendTwice(t, "http://"+addr+"/query")
	})

	for _, backend := range []idemtest.Kind{idemtest.SQLite, idemtest.Postgres, idemtest.MariaDB} {
		t.Run(string(backend), func(t *testing.T) {
			dsn := filepath.Join(t.TempDir(), "app.db")
			if backend != idemtest.SQLite {
				// A PostgreSQL schema or a MariaDB database of its own
				// (a mysql:// URL), dropped at the end.
				dsn = idemtest.Open(t, backend).DSN
			}
			addr, metrics := proctest.FreeAddr(t), proctest.FreeAddr(t)
			p := proctest.Start(t, bin, []string{"DATABASE_URL=" + dsn, "ADDR=" + addr, "METRICS_ADDR=" + metrics}, nil)
			p.WaitListening(t, addr, time.Minute)
			sendTwice(t, "http://"+addr+"/query")
			oneRowPerKey(t, "http://"+addr+"/query")
			sendInHeader(t, "http://"+addr+"/query")
			exported(t, "http://"+metrics+"/metrics")
			stats(t, idemctl, dsn)
		})
	}
	// The outbox guide extends the same app: a mutation that enqueues a
	// webhook, and a worker process that delivers it.
	follow(t, root, app, outboxGuide)
	t.Run("outbox", func(t *testing.T) { webhookAfterACrash(t, app) })
	t.Logf("the guides' path: %.1fs in all", time.Since(start).Seconds())
}

// follow writes the marked files of the guide at doc (relative to root)
// into the module at app and runs its marked commands, in the guide's
// order.
func follow(t *testing.T, root, app, doc string) {
	t.Helper()
	steps := markedSteps(t, filepath.Join(root, doc))
	if len(steps) == 0 {
		t.Fatal(doc + " marks no blocks (<!-- file: PATH --> or <!-- commands -->)")
	}
	env := append(os.Environ(),
		"GOFLAGS=-buildvcs=false", "GOSUMDB=off", "GOWORK=off", "GOTOOLCHAIN=local")
	run := func(line int, args ...string) {
		t.Helper()
		began := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, args[0], args[1:]...)
		cmd.Dir, cmd.Env = app, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s:%d: %s: %v\n%s", doc, line, strings.Join(args, " "), err, out)
		}
		t.Logf("%s:%d: %s (%.1fs)", doc, line, strings.Join(args, " "), time.Since(began).Seconds())
	}
	hadGraph := doc != guide // the other guides extend the adoption guide's app
	for _, s := range steps {
		if s.file != "" {
			writeFile(t, app, s.file, s.content)
			continue
		}
		for _, c := range s.commands {
			args := strings.Fields(c)
			if c == "go get github.com/goovo/idem@latest" {
				run(s.line, "go", "mod", "edit", "-replace=github.com/goovo/idem="+root)
				run(s.line, "go", "get", "github.com/goovo/idem@v0.0.0")
				continue
			}
			if args[0] != "go" {
				t.Fatalf("%s:%d: %q: the test runs go commands only", doc, s.line, c)
			}
			if c == "go generate ./..." && !hadGraph {
				// The app's graph package from before it added idem, in
				// entgql's tutorial's shape: its root resolver with
				// NewSchema, its own schema declaring scalar Time, its
				// createBook and createAuthor resolvers with entgql's
				// default body, and the ent.graphql entgql alone wrote
				// (declaring scalar Time and scalar Cursor: the first
				// generate failed on it with "Undefined type Cursor"). It comes after the guide's go mod tidy
				// since it imports the ent package, which this new module
				// has only once generation ran.
				copyTree(t, "testdata/graph", filepath.Join(app, "graph"))
				hadGraph = true
			}
			run(s.line, args...)
		}
	}
}

// sendTwice creates an author, then a book and tags the author's books,
// each mutation twice with one key: the first runs, the second replays the
// same data.
func sendTwice(t *testing.T, url string) {
	author := post(t, url, "acme", `mutation { createAuthor(idempotencyKey: "a-1", input: {name: "Le Guin"}) { id } }`, nil)
	idemtest.RequireExecuted(t, author.body, "createAuthor")
	var a struct {
		CreateAuthor struct{ ID string }
	}
	if err := json.Unmarshal(author.Data, &a); err != nil || a.CreateAuthor.ID == "" {
		t.Fatalf("createAuthor: %s", author.body)
	}
	vars := map[string]any{"author": a.CreateAuthor.ID}

	for _, m := range []struct{ field, query string }{
		{"createBook", `mutation($author: ID!) {
			createBook(idempotencyKey: "b-1", input: {title: "The Dispossessed", format: HARDCOVER, tags: ["sf"], pages: 387, authorID: $author}) {
				id headline format tags pages author { name }
			}
		}`},
		{"tagBooks", `mutation($author: ID!) { tagBooks(idempotencyKey: "t-1", authorID: $author, tag: "classic") }`},
	} {
		first := post(t, url, "acme", m.query, vars)
		idemtest.RequireExecuted(t, first.body, m.field)
		second := post(t, url, "acme", m.query, vars)
		idemtest.RequireReplayed(t, second.body, m.field)
		if second.header.Get("Idempotent-Replayed") != "true" {
			t.Errorf("%s: the replay has no Idempotent-Replayed: true header: %v", m.field, second.header)
		}
		if !bytes.Equal(first.Data, second.Data) {
			t.Errorf("%s: the replay's data differ:\n%s\n%s", m.field, first.Data, second.Data)
		}
		t.Logf("%s: %s", m.field, first.Data)
	}

	// The key scope the guide states: a key belongs to a tenant and a
	// record entity. tagBooks' key is new to Author's records, and
	// another tenant's a-1 is its own; b-1 with other arguments is refused.
	for _, c := range []struct{ tenant, key, want string }{
		{"acme", "t-1", idemcode.OutcomeExecuted},
		{"globex", "a-1", idemcode.OutcomeExecuted},
	} {
		r := post(t, url, c.tenant, `mutation($key: String!) { createAuthor(idempotencyKey: $key, input: {name: "Butler"}) { id } }`, map[string]any{"key": c.key})
		if got := idemtest.Outcome(t, r.body, "createAuthor"); got != c.want {
			t.Errorf("tenant %s, key %s: outcome %q, want %q: %s", c.tenant, c.key, got, c.want, r.body)
		}
	}
	r := send(t, url, "acme", `mutation { createBook(idempotencyKey: "b-1", input: {title: "Kindred"}) { id } }`, nil)
	if len(r.Errors) != 1 || !bytes.Contains(r.Errors[0], []byte(idemcode.KeyReused)) {
		t.Errorf("b-1 for another book: want %s, got %s", idemcode.KeyReused, r.body)
	}
}

// oneRowPerKey sends one createBook many times at once with one key: the
// app's own createBook resolver, which it had before it added idem, leaves
// one book, not one per request nor two per key.
func oneRowPerKey(t *testing.T, url string) {
	t.Helper()
	const copies = 20
	q := `mutation { createBook(idempotencyKey: "one-row", input: {title: "Solaris"}) { id } }`
	var wg sync.WaitGroup
	ids := make(chan string, copies)
	for range copies {
		wg.Go(func() {
			r, err := trySend(url, "acme", "", q, nil)
			if err != nil {
				t.Error(err)
				return
			}
			var d struct{ CreateBook struct{ ID string } }
			if len(r.Errors) == 0 && json.Unmarshal(r.Data, &d) == nil {
				ids <- d.CreateBook.ID
			}
		})
	}
	wg.Wait()
	close(ids)
	first := ""
	for id := range ids {
		if first == "" {
			first = id
		}
		if id != first {
			t.Errorf("one key, two books answered: %s and %s", first, id)
		}
	}
	if first == "" {
		t.Fatal("no copy of createBook succeeded")
	}
	r := post(t, url, "acme", `{ booksTitled(title: "Solaris") }`, nil)
	if string(r.Data) != `{"booksTitled":1}` {
		t.Errorf("books titled Solaris after %d copies of one key: %s, want 1", copies, r.Data)
	}
}

// sendInHeader sends createBook and tagBooks twice each with the key in
// the Idempotency-Key header, as the guide's "The key in a header" says:
// the first runs, the second replays the same data, and the answer
// repeats the key in the form it was sent.
func sendInHeader(t *testing.T, url string) {
	t.Helper()
	for _, m := range []struct{ field, key, query string }{
		{"createBook", `"b-2"`, `mutation { createBook(input: {title: "Emma"}) { id headline } }`},
		{"tagBooks", `t-2`, `mutation($author: ID!) { tagBooks(authorID: $author, tag: "header") }`},
	} {
		var vars map[string]any
		if m.field == "tagBooks" {
			a := post(t, url, "acme", `mutation { createAuthor(idempotencyKey: "a-2", input: {name: "Austen"}) { id } }`, nil)
			var r struct{ CreateAuthor struct{ ID string } }
			if err := json.Unmarshal(a.Data, &r); err != nil {
				t.Fatal(err)
			}
			vars = map[string]any{"author": r.CreateAuthor.ID}
		}
		first := postKeyed(t, url, "acme", m.key, m.query, vars)
		idemtest.RequireExecuted(t, first.body, m.field)
		second := postKeyed(t, url, "acme", m.key, m.query, vars)
		idemtest.RequireReplayed(t, second.body, m.field)
		if !bytes.Equal(first.Data, second.Data) {
			t.Errorf("%s, key in the header: the replay's data differ:\n%s\n%s", m.field, first.Data, second.Data)
		}
		if got := second.header.Get(idemcode.HeaderKey); got != m.key {
			t.Errorf("%s: the answer's %s header is %q, want %q", m.field, idemcode.HeaderKey, got, m.key)
		}
	}
	// Neither header nor argument: the key is still required.
	r := send(t, url, "acme", `mutation { createBook(input: {title: "Persuasion"}) { id } }`, nil)
	if len(r.Errors) != 1 || !bytes.Contains(r.Errors[0], []byte(idemcode.KeyMissing)) {
		t.Errorf("no key at all: want %s, got %s", idemcode.KeyMissing, r.body)
	}
}

// exported checks that the server exports the hook's metrics as
// metricsGuide's "Exporting the metrics" says: in Prometheus format, with the
// replays counted.
func exported(t *testing.T, url string) {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"idem_claims_total", "idem_replays_total"} {
		if res.StatusCode != http.StatusOK || !regexp.MustCompile(`(?m)^`+name+`\{.*\} [1-9]`).Match(b) {
			t.Errorf("GET %s: %d, no %s counted:\n%.2000s", url, res.StatusCode, name, b)
		}
	}
}

// stats runs the guide's idemctl against the server's database: the
// records of the requests sent are counted per entity, and inspect knows
// a record's mutation's window.
func stats(t *testing.T, idemctl, dsn string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, idemctl, "stats")
	cmd.Env = append(os.Environ(), "DATABASE_URL="+dsn)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("idemctl stats: %v\n%s", err, out)
	}
	for _, entity := range []string{"Author", "Book", "IdempotencyRecord"} {
		if !regexp.MustCompile(`(?m)^` + entity + `\s`).Match(out) {
			t.Errorf("idemctl stats has no line for %s:\n%s", entity, out)
		}
	}
	t.Logf("idemctl stats:\n%s", out)

	// The guide's idemctl reads the GraphQL schema: inspect states the
	// record's own window, not the entity's upper bound.
	cmd = exec.CommandContext(ctx, idemctl, "inspect", "-tenant", "acme", "-key", "b-1")
	cmd.Env = append(os.Environ(), "DATABASE_URL="+dsn)
	out, err = cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("idemctl inspect: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "replays the stored response until") || strings.Contains(string(out), "at the latest") {
		t.Errorf("idemctl inspect does not state the record's own window (has it read the schema?):\n%s", out)
	}
}

type response struct {
	body   []byte
	header http.Header
	Data   json.RawMessage
	Errors []json.RawMessage
}

// post sends a GraphQL request as tenant and fails the test on an error in
// the answer.
func post(t *testing.T, url, tenant, query string, vars map[string]any) response {
	t.Helper()
	r := send(t, url, tenant, query, vars)
	if len(r.Errors) > 0 {
		t.Fatalf("errors: %s", r.body)
	}
	return r
}

// postKeyed is post with the key in the Idempotency-Key header.
func postKeyed(t *testing.T, url, tenant, key, query string, vars map[string]any) response {
	t.Helper()
	r := sendKeyed(t, url, tenant, key, query, vars)
	if len(r.Errors) > 0 {
		t.Fatalf("errors: %s", r.body)
	}
	return r
}

// send sends a GraphQL request as tenant and returns the answer, which
// must be HTTP 200 and JSON.
func send(t *testing.T, url, tenant, query string, vars map[string]any) response {
	t.Helper()
	return sendKeyed(t, url, tenant, "", query, vars)
}

// sendKeyed is send with the Idempotency-Key header set to key, unless
// key is empty.
func sendKeyed(t *testing.T, url, tenant, key, query string, vars map[string]any) response {
	t.Helper()
	r, err := trySend(url, tenant, key, query, vars)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// trySend is sendKeyed for any goroutine: it returns what would fail the
// test.
func trySend(url, tenant, key, query string, vars map[string]any) (response, error) {
	var r response
	b, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	if err != nil {
		return r, err
	}
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return r, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Tenant-ID", tenant)
	if key != "" {
		req.Header.Set(idemcode.HeaderKey, key)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return r, err
	}
	defer res.Body.Close()
	r.header = res.Header
	if r.body, err = io.ReadAll(res.Body); err != nil {
		return r, err
	}
	if err := json.Unmarshal(r.body, &r); err != nil || res.StatusCode != http.StatusOK {
		return r, fmt.Errorf("HTTP %d: %s", res.StatusCode, r.body)
	}
	return r, nil
}

// appDir returns the directory of the new module, empty, for this checkout
// at root, and holds a lock on it until the test ends. It is the same
// directory on every run, not a t.TempDir: the build cache keys the
// module's packages by their directory, so that a run whose generated
// code is unchanged compiles nothing again.
func appDir(t *testing.T, root string) string {
	t.Helper()
	sum := sha256.Sum256([]byte(root))
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("idem-readmepath-%x", sum[:6]))
	lock, err := os.OpenFile(dir+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		os.RemoveAll(dir)
		lock.Close() // releases the lock
	})
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// goDirective returns the go version of the go.mod at path.
func goDirective(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("%s: no go directive", path)
	}
	return string(m[1])
}

func writeFile(t *testing.T, dir, name, content string) {
	t.Helper()
	path := filepath.Join(dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// copyTree copies the files under src into dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		writeFile(t, dst, filepath.ToSlash(rel), string(b))
		return nil
	})
	if err != nil {
		t.Fatal(fmt.Errorf("copy %s: %w", src, err))
	}
}
