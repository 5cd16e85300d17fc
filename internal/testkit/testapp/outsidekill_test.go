package testapp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/google/uuid"

	"github.com/goovo/idem"
	"github.com/goovo/idem/idemctl"
	"github.com/goovo/idem/idemdb"
	"github.com/goovo/idem/idemschema"
	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/testkit"
	"github.com/goovo/idem/internal/testkit/proctest"
	"github.com/goovo/idem/internal/testkit/testapp"
	"github.com/goovo/idem/internal/testkit/testapp/ent"
	"github.com/goovo/idem/internal/testkit/testapp/ent/shipment"
	"github.com/goovo/idem/internal/testkit/testapp/graph"
)

// The environment of a server process of TestKilledAfterAWriteOutsideTheClaim:
// this test binary, started again, serves the test application instead of
// running the tests (TestMain).
const (
	envServe   = "IDEM_OUTSIDE_SERVE"   // the variant: client, own-tx, alone
	envDSN     = "IDEM_OUTSIDE_DSN"     // the test's database
	envAddr    = "IDEM_OUTSIDE_ADDR"    // where to listen
	envGate    = "IDEM_OUTSIDE_GATE"    // first process: the URL its resolver calls after its write, where it is killed
	envRecover = "IDEM_OUTSIDE_RECOVER" // restarted process: the recoverer on
)

func TestMain(m *testing.M) {
	if variant := os.Getenv(envServe); variant != "" {
		if err := serveOutsideWriter(variant); err != nil {
			fmt.Fprintln(os.Stderr, "outside writer:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	code := m.Run()
	proctest.Cleanup()
	os.Exit(code)
}

// The resolver of an idempotent mutation writes outside the claim (through
// the server's client, or in a transaction of its own that it commits),
// and its server process is killed with SIGKILL right after: the write was
// refused, so nothing of it is in the database. A server restarted with
// the resolver fixed (writing through ent.FromContext) finishes the
// intent (its recoverer), and the key has one row, never two: without the
// refusal the first write would have committed on its own and the
// recoverer's run would make a second.
//
// idem.CommitsAlone is the one way to write on one's own: killed right
// after such a write (PostgreSQL only: on SQLite the claim's transaction
// holds the one writer's turn), its row is there, independent of the
// mutation, which the kill rolled back; the recoverer's run makes it again
// (what CommitsAlone gives up, as its documentation says), while the
// claim's own work is done once.
//
// Without the refusal the test fails on PostgreSQL (the write committed on
// its own: a row after the kill, two after the recovery). On SQLite the
// claim's transaction holds the one writer's turn, so an unrefused write
// would wait for it until the busy timeout and fail: it checks there that
// the refusal leaves the key recoverable.
func TestKilledAfterAWriteOutsideTheClaim(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		be := testapp.NewBench(t, b, idem.Config{RecoverAfter: idem.RecoverNever})
		variants := []string{"client", "own-tx"}
		if b.IsPostgres() {
			variants = append(variants, "alone")
		}
		for _, variant := range variants {
			key := "killed-" + variant
			var created struct{ CreateShipment struct{ ID string } }
			if err := json.Unmarshal(be.Post("org-1", "ship-"+variant, 1000).Data, &created); err != nil || created.CreateShipment.ID == "" {
				t.Fatalf("create: %v", err)
			}
			id := created.CreateShipment.ID
			killAfterTheWrite(t, be, variant, key, id)
			if n := destination(t, be, variant); n != 0 {
				t.Fatalf("%s: %d rows of the resolver's own after the kill, want 0 (the write outside the claim is refused; the claim's work rolled back)", variant, n)
			}
			if n := destination(t, be, variant+"-alone"); variant == "alone" && n != 1 {
				t.Fatalf("alone: %d rows written with CommitsAlone after the kill, want 1 (it committed on its own)", n)
			}

			// Restarted: the recoverer finishes the intent.
			restarted := startOutsideWriter(t, be, variant, "")
			admin := idemctl.New(be.Hook)
			var state string
			testkit.Eventually(t, func() bool {
				recs, err := admin.Inspect(context.Background(), "org-1", key)
				if err != nil || len(recs) != 1 {
					t.Fatalf("%s: inspect: %v %v", variant, recs, err)
				}
				state = recs[0].State
				return state != idemtest.Pending
			}, "%s: the intent finished by the restarted server's recoverer", variant)
			if state != idemtest.Succeeded {
				t.Fatalf("%s: the recoverer's run ended %s, want %s:\n%s", variant, state, idemtest.Succeeded, restarted.Output())
			}
			if n := destination(t, be, variant); n != 1 {
				t.Fatalf("%s: %d rows of the resolver's own for one key, want 1", variant, n)
			}
			if s := shipmentByID(t, be, id); strings.Count(s.Label, "+approved") != 1 {
				t.Fatalf("%s: the claim's own work done %d times (label %q), want once", variant, strings.Count(s.Label, "+approved"), s.Label)
			}
			if n := destination(t, be, variant+"-alone"); variant == "alone" && n != 2 {
				t.Fatalf("alone: %d rows written with CommitsAlone, want 2 (made again by the recoverer's run)", n)
			}
			restarted.Kill(t)
		}
	})
}

// killAfterTheWrite starts a server process that runs approveShipment with
// key on shipment id, its resolver writing as variant says, and kills it
// with SIGKILL once the resolver has made its write and called the gate.
func killAfterTheWrite(t *testing.T, be *testapp.Bench, variant, key, id string) {
	t.Helper()
	written := make(chan struct{}, 1)
	gate := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		written <- struct{}{}
		<-r.Context().Done() // held until the process dies
	}))
	t.Cleanup(gate.Close)
	p := startOutsideWriter(t, be, variant, gate.URL)
	answered := make(chan error, 1)
	go func() {
		_, err := post(p.url, key, id)
		answered <- err
	}()
	select {
	case <-written:
	case err := <-answered:
		t.Fatalf("%s: the mutation answered (%v) before its resolver reached the gate:\n%s", variant, err, p.Output())
	}
	if !p.Kill(t) {
		t.Fatalf("%s: the server was not killed by SIGKILL:\n%s", variant, p.Output())
	}
	if err := <-answered; err == nil {
		t.Fatalf("%s: the killed server's request got an answer", variant)
	}
}

type outsideWriter struct {
	*proctest.Process
	url string
}

// startOutsideWriter starts this test binary as a server of variant on
// be's database, and waits until it listens: the first process with the
// gate's URL, the restarted one (gate "") with the recoverer.
func startOutsideWriter(t *testing.T, be *testapp.Bench, variant, gate string) *outsideWriter {
	t.Helper()
	addr := proctest.FreeAddr(t)
	env := []string{envServe + "=" + variant, envDSN + "=" + be.DB.DSN, envAddr + "=" + addr, envGate + "=" + gate}
	if gate == "" {
		env = append(env, envRecover+"=1")
	}
	p := proctest.Start(t, os.Args[0], env, nil)
	p.WaitListening(t, addr, testkit.WaitBound)
	return &outsideWriter{Process: p, url: "http://" + addr + "/"}
}

// post sends approveShipment to a server process; an error is a broken
// connection.
func post(url, key, id string) (string, error) {
	body := fmt.Sprintf(`{"query":"mutation($k: String!, $id: ID!) { approveShipment(idempotencyKey: $k, id: $id) { id label } }","variables":{"k":%q,"id":%q}}`, key, id)
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(graph.OrgHeader, "org-1")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	var sb strings.Builder
	_, err = fmt.Fprint(&sb, res.Status)
	return sb.String(), err
}

// destination counts the shipments with destination d, the rows the
// resolvers under test write of their own.
func destination(t *testing.T, be *testapp.Bench, d string) int {
	t.Helper()
	n, err := be.Client.Shipment.Query().Where(shipment.Destination(d)).Count(idemschema.IncludeUnfinished(context.Background()))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func shipmentByID(t *testing.T, be *testapp.Bench, id string) *ent.Shipment {
	t.Helper()
	s, err := be.Client.Shipment.Get(idemschema.IncludeUnfinished(context.Background()), uuid.MustParse(id))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// serveOutsideWriter is the server process: the test application on the
// database of envDSN, its approveShipment resolver writing as variant
// says. With envGate (the first process) the resolver writes outside the
// claim (or, for "alone", with idem.CommitsAlone beside the claim's own
// write) and then waits at the gate, where the test kills the process;
// without (the restarted process) it runs the fixed resolver, and the
// recoverer finishes what the first left pending.
func serveOutsideWriter(variant string) error {
	drv, err := idemdb.Open(os.Getenv(envDSN))
	if err != nil {
		return err
	}
	client := ent.NewClient(ent.Driver(drv))
	defer client.Close()
	resolver := &graph.Resolver{Client: client, Hook: outsideWrite(client, variant, os.Getenv(envGate))}
	srv := handler.New(graph.NewExecutableSchema(graph.Config{Resolvers: resolver}))
	srv.AddTransport(transport.POST{})
	cfg := idem.Config{Backend: client.IdempotencyBackend(), Tenant: graph.OrgFromContext, TenantContext: graph.OrgContext,
		Lease: time.Second, RecoverAfter: idem.RecoverNever}
	if os.Getenv(envRecover) != "" {
		cfg.RecoverAfter = 100 * time.Millisecond
	}
	hook, err := idem.New(cfg)
	if err != nil {
		return err
	}
	h, err := hook.Handler(srv)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", os.Getenv(envAddr))
	if err != nil {
		return err
	}
	return http.Serve(ln, graph.WithOrg(h))
}

// outsideWrite is the resolver's hook of a server process.
func outsideWrite(client *ent.Client, variant, gate string) func(context.Context, *ent.Shipment) error {
	create := func(ctx context.Context, c *ent.Client, d string) error {
		_, err := c.Shipment.Create().SetInput(ent.CreateShipmentInput{Destination: d, WeightGrams: 1}).SetOrg("org-1").Save(ctx)
		return err
	}
	return func(ctx context.Context, _ *ent.Shipment) error {
		var err error
		switch {
		case variant == "alone":
			// The claim's own row, and one that commits on its own.
			err = errors.Join(create(ctx, ent.FromContext(ctx), variant), create(idem.CommitsAlone(ctx), client, variant+"-alone"))
		case gate == "":
			err = create(ctx, ent.FromContext(ctx), variant) // fixed
		case variant == "client":
			_ = create(ctx, client, variant) // refused: ignored, as a careless resolver would
		default: // own-tx; refused at its start on SQLite, at its write on PostgreSQL
			if tx, terr := client.Tx(ctx); terr == nil {
				_ = create(ctx, tx.Client(), variant)
				_ = tx.Commit()
			}
		}
		if err != nil || gate == "" {
			return err
		}
		res, err := http.Get(gate) // held there until the process is killed
		if err == nil {
			res.Body.Close()
		}
		return errors.New("the gate answered: the test did not kill this process")
	}
}
