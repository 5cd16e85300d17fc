package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"
)

// violations collects what the audit found wrong, by kind, with a few
// examples of each.
type violations struct {
	counts   counter
	mu       sync.Mutex
	examples map[string][]string
}

// maxExamples is how many examples of each kind the summary shows.
const maxExamples = 3

func (v *violations) add(kind, format string, args ...any) {
	v.counts.add(kind)
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.examples == nil {
		v.examples = map[string][]string{}
	}
	if len(v.examples[kind]) < maxExamples {
		v.examples[kind] = append(v.examples[kind], fmt.Sprintf(format, args...))
	}
}

func (v *violations) total() int { return v.counts.total() }

// Rows of the database, as the audit reads them.
type (
	orderRow struct {
		id     int
		tenant string
		key    sql.NullString
		status sql.NullString
		paid   bool
	}
	paymentRow struct {
		id       int
		tenant   string
		key      sql.NullString
		status   sql.NullString
		chargeID sql.NullString
		orderID  int
	}
	receiptRow struct {
		id        string
		tenant    string
		paymentID int
		requests  int
	}
	chargeRow struct {
		id       string
		tenant   string
		key      string
		orderID  int
		amount   int
		requests int
		voided   bool
	}
)

// snapshot is the database after the run: every order, payment and
// provider charge of the run's schema.
type snapshot struct {
	orders   []orderRow
	payments []paymentRow
	charges  []chargeRow
	receipts []receiptRow
}

func readSnapshot(ctx context.Context, db *sql.DB) (*snapshot, error) {
	s := &snapshot{}
	err := eachRow(ctx, db, `SELECT id, tenant_id, idempotency_key, idempotency_status, paid FROM orders`, func(rows *sql.Rows) error {
		var r orderRow
		err := rows.Scan(&r.id, &r.tenant, &r.key, &r.status, &r.paid)
		s.orders = append(s.orders, r)
		return err
	})
	if err == nil {
		err = eachRow(ctx, db, `SELECT id, tenant_id, idempotency_key, idempotency_status, provider_charge_id, order_payments FROM payments`, func(rows *sql.Rows) error {
			var r paymentRow
			err := rows.Scan(&r.id, &r.tenant, &r.key, &r.status, &r.chargeID, &r.orderID)
			s.payments = append(s.payments, r)
			return err
		})
	}
	if err == nil {
		err = eachRow(ctx, db, `SELECT id, tenant, idempotency_key, order_id, amount, requests, voided FROM provider_charges`, func(rows *sql.Rows) error {
			var r chargeRow
			err := rows.Scan(&r.id, &r.tenant, &r.key, &r.orderID, &r.amount, &r.requests, &r.voided)
			s.charges = append(s.charges, r)
			return err
		})
	}
	if err == nil {
		err = eachRow(ctx, db, `SELECT id, tenant, payment_id, requests FROM mailer_receipts`, func(rows *sql.Rows) error {
			var r receiptRow
			err := rows.Scan(&r.id, &r.tenant, &r.paymentID, &r.requests)
			s.receipts = append(s.receipts, r)
			return err
		})
	}
	return s, err
}

// eachRow runs query and calls scan for every row.
func eachRow(ctx context.Context, db *sql.DB, query string, scan func(*sql.Rows) error) error {
	rows, err := db.QueryContext(ctx, query)
	if err != nil {
		return fmt.Errorf("audit: %s: %w", query, err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return fmt.Errorf("audit: %s: %w", query, err)
		}
	}
	return rows.Err()
}

// auditReport is what the audit found besides violations.
type auditReport struct {
	orphanCharges   int // charges of payment intents that finally failed
	dedupedRequests int // provider requests deduplicated by key
	dedupedKeys     int // keys the provider saw more than once
	replays         int // fresh replays compared
	// redeliveredReceipts counts the mailer's requests for a receipt it
	// had sent (a job run again after its process died), deduplicated.
	redeliveredReceipts int
	noRetry             noRetryReport
}

// noRetryReport counts the intents sent once and never retried.
type noRetryReport struct {
	intents, answered int
	// Of the unanswered: finished by the recoverer (paid, or failed with
	// ORDER_ALREADY_PAID), or never claimed (the request died first).
	recoveredPaid, recoveredFailed, unclaimed int
}

// auditDatabase compares every intent's answers with the database and the
// provider's ledger. It runs after every intent was answered and every
// server stopped.
func auditDatabase(intents []*intent, s *snapshot, v *violations) auditReport {
	var rep auditReport
	x := indexSnapshot(intents, s, v, &rep)
	for _, in := range intents {
		auditIntent(in, x, v, &rep)
	}
	auditStrays(s, x, v)
	auditReceipts(s, v, &rep)
	return rep
}

// snapshotIndex is the snapshot's rows by key, and what the audit counts
// over them.
type snapshotIndex struct {
	ordersByKey      map[string][]orderRow
	paymentsByKey    map[string][]paymentRow
	chargesByKey     map[string][]chargeRow
	paidByOrder      map[int]int     // succeeded payments per order id
	known            map[string]bool // the keys of the intents
	succeededByOrder map[string]int  // succeeded payment intents per order id
}

// indexSnapshot indexes the rows, counts the provider's deduplicated
// requests, and finds the rows left pending.
func indexSnapshot(intents []*intent, s *snapshot, v *violations, rep *auditReport) *snapshotIndex {
	x := &snapshotIndex{
		ordersByKey: map[string][]orderRow{}, paymentsByKey: map[string][]paymentRow{}, chargesByKey: map[string][]chargeRow{},
		paidByOrder: map[int]int{}, known: map[string]bool{}, succeededByOrder: map[string]int{},
	}
	answered := map[string]bool{}
	for _, in := range intents {
		_, answered[in.key] = in.result()
		x.known[in.key] = true
		if in.field == "createPayment" && in.succeeded() {
			x.succeededByOrder[in.orderID]++
		}
	}
	pending := func(what string, id int, key string) {
		if answered[key] {
			v.add("pending", "%s %d (key %s) is still pending although its intent was answered: a lost completion", what, id, key)
		} else {
			v.add("pending", "%s %d (key %s) is still pending: its intent never got a final answer", what, id, key)
		}
	}
	for _, o := range s.orders {
		if o.status.String == "pending" {
			pending("order", o.id, o.key.String)
		}
		x.ordersByKey[o.key.String] = append(x.ordersByKey[o.key.String], o)
	}
	for _, p := range s.payments {
		switch p.status.String {
		case "pending":
			pending("payment", p.id, p.key.String)
		case "succeeded":
			x.paidByOrder[p.orderID]++
		}
		x.paymentsByKey[p.key.String] = append(x.paymentsByKey[p.key.String], p)
	}
	for _, c := range s.charges {
		x.chargesByKey[c.key] = append(x.chargesByKey[c.key], c)
		if c.requests > 1 {
			rep.dedupedKeys++
			rep.dedupedRequests += c.requests - 1
		}
	}
	return x
}

// auditIntent checks one intent's answers and rows.
func auditIntent(in *intent, x *snapshotIndex, v *violations, rep *auditReport) {
	a, ok := in.result()
	if in.noRetry {
		rep.noRetry.intents++
		if !ok {
			auditUnanswered(in, x.paymentsByKey[in.key], x.chargesByKey[in.key], &rep.noRetry, v)
			return
		}
		rep.noRetry.answered++
	}
	if !ok {
		v.add("unanswered", "%s %s: no final answer before the deadline", in.field, in.key)
		return
	}
	in.mu.Lock()
	for _, d := range in.differ {
		v.add("answers-differ", "%s %s: server %d answered %s %s, server %d answered %s %s",
			in.field, in.key, a.server, a.kind, a.data, d.server, d.kind, d.data)
	}
	in.mu.Unlock()
	switch in.field {
	case "createOrder":
		auditOrder(in, a, x.ordersByKey[in.key], v)
	case "createPayment":
		if auditPayment(in, a, x.paymentsByKey[in.key], x.chargesByKey[in.key], x.succeededByOrder[in.orderID], v) {
			rep.orphanCharges++
		}
	}
}

// auditStrays finds rows and charges of keys no intent sent, and orders
// paid twice or marked paid wrongly.
func auditStrays(s *snapshot, x *snapshotIndex, v *violations) {
	for _, o := range s.orders {
		if !x.known[o.key.String] {
			v.add("stray-row", "order %d has key %q, which no intent sent", o.id, o.key.String)
		}
		if o.status.String != "succeeded" {
			continue
		}
		if n := x.paidByOrder[o.id]; n > 1 {
			v.add("double-payment", "order %d has %d succeeded payments", o.id, n)
		}
		if o.paid != (x.paidByOrder[o.id] > 0) {
			v.add("paid-mismatch", "order %d: paid=%v, succeeded payments %d", o.id, o.paid, x.paidByOrder[o.id])
		}
	}
	for _, p := range s.payments {
		if !x.known[p.key.String] {
			v.add("stray-row", "payment %d has key %q, which no intent sent", p.id, p.key.String)
		}
	}
	for _, c := range s.charges {
		if !x.known[c.key] {
			v.add("stray-charge", "provider charge %s has key %q, which no intent sent", c.id, c.key)
		}
	}
}

// auditReceipts checks the outbox: every succeeded payment has exactly one
// receipt (its job was enqueued in its transaction and delivered once the
// mailer deduplicated the redeliveries), and nothing else has one (an
// attempt rolled back or fenced out enqueued nothing that ran).
func auditReceipts(s *snapshot, v *violations, rep *auditReport) {
	type payment struct {
		tenant string
		id     int
	}
	receipts := map[payment]int{}
	for _, r := range s.receipts {
		receipts[payment{r.tenant, r.paymentID}]++
		rep.redeliveredReceipts += r.requests - 1
	}
	succeeded := map[payment]bool{}
	for _, p := range s.payments {
		if p.status.String != "succeeded" {
			continue
		}
		k := payment{p.tenant, p.id}
		succeeded[k] = true
		switch n := receipts[k]; {
		case n == 0:
			v.add("missing-receipt", "payment %d (key %s) succeeded and has no receipt", p.id, p.key.String)
		case n > 1:
			v.add("double-receipt", "payment %d (key %s) has %d receipts", p.id, p.key.String, n)
		}
	}
	for k, n := range receipts {
		if !succeeded[k] {
			v.add("stray-receipt", "payment %d of %s has %d receipt(s) and did not succeed", k.id, k.tenant, n)
		}
	}
}

// auditUnanswered checks a payment intent whose only request got no final
// answer and whose client never retried: the recoverer must have made it
// final with one live charge (or voided it, with ORDER_ALREADY_PAID), or
// the request died before its claim and nothing happened. A pending row is
// reported by auditDatabase.
func auditUnanswered(in *intent, rows []paymentRow, charges []chargeRow, nr *noRetryReport, v *violations) {
	live := 0
	for _, c := range charges {
		if !c.voided {
			live++
		}
	}
	switch {
	case len(rows) == 0:
		nr.unclaimed++
		if len(charges) > 0 {
			v.add("charges", "createPayment %s (no retry): no payment row, but %d provider charges", in.key, len(charges))
		}
	case len(rows) > 1:
		v.add("payment-rows", "createPayment %s (no retry): %d payment rows have its key", in.key, len(rows))
	case rows[0].status.String == "succeeded":
		nr.recoveredPaid++
		if len(charges) != 1 || live != 1 || charges[0].id != rows[0].chargeID.String {
			v.add("charges", "createPayment %s (no retry) was recovered, paid, with %d charges (%d live), want its one charge live", in.key, len(charges), live)
		}
	case rows[0].status.String == "failed":
		nr.recoveredFailed++
		if live != 0 {
			v.add("charges", "createPayment %s (no retry) was recovered as failed, but %d of its charges are live", in.key, live)
		}
	}
}

func auditOrder(in *intent, a answer, rows []orderRow, v *violations) {
	if outcomeClass(a.kind) != "success" {
		v.add("unexpected-answer", "createOrder %s: final answer %s %s", in.key, a.kind, a.data)
		return
	}
	var res orderResult
	_ = json.Unmarshal(a.data, &res)
	if len(rows) != 1 {
		v.add("order-rows", "createOrder %s succeeded, but %d order rows have its key", in.key, len(rows))
		return
	}
	if r := rows[0]; r.status.String != "succeeded" || strconv.Itoa(r.id) != res.CreateOrder.ID || r.tenant != in.tenant {
		v.add("order-rows", "createOrder %s answered order %s; its row is id %d, tenant %s, status %s",
			in.key, res.CreateOrder.ID, r.id, r.tenant, r.status.String)
	}
}

// auditPayment checks one payment intent. succeededForOrder counts the
// order's payment intents that succeeded. It reports whether the intent
// failed for good although the provider charged its key (an orphan charge:
// see the summary).
func auditPayment(in *intent, a answer, rows []paymentRow, charges []chargeRow, succeededForOrder int, v *violations) (orphan bool) {
	if len(charges) > 1 {
		v.add("charges", "createPayment %s: %d provider charges for one key", in.key, len(charges))
	}
	if outcomeClass(a.kind) != "success" {
		// Only a competing payment may fail, with ORDER_ALREADY_PAID, and
		// only because the other one succeeded.
		if a.kind != "ORDER_ALREADY_PAID" || succeededForOrder != 1 {
			v.add("unexpected-answer", "createPayment %s (order %s): final answer %s %s, %d payments of the order succeeded",
				in.key, in.orderID, a.kind, a.data, succeededForOrder)
		}
		if len(rows) != 1 || rows[0].status.String != "failed" {
			v.add("payment-rows", "createPayment %s failed for good, but its key has %d payment rows (want 1, failed)", in.key, len(rows))
		}
		// An attempt may have charged before losing: the example voids
		// that charge before it answers ORDER_ALREADY_PAID.
		for _, c := range charges {
			if !c.voided {
				v.add("charges", "createPayment %s failed for good, but its charge %s was not voided: the customer paid twice", in.key, c.id)
			}
		}
		return len(charges) > 0
	}
	var res paymentResult
	_ = json.Unmarshal(a.data, &res)
	p := res.CreatePayment
	if !p.Order.Paid || p.ProviderChargeID == "" || p.Order.ID != in.orderID || p.Amount != in.amount {
		v.add("answer-content", "createPayment %s: answer %s does not show order %s paid with a charge of %d", in.key, a.data, in.orderID, in.amount)
	}
	if len(rows) != 1 {
		v.add("payment-rows", "createPayment %s succeeded, but %d payment rows have its key", in.key, len(rows))
		return false
	}
	r := rows[0]
	if r.status.String != "succeeded" || strconv.Itoa(r.id) != p.ID || strconv.Itoa(r.orderID) != in.orderID || r.chargeID.String != p.ProviderChargeID {
		v.add("payment-rows", "createPayment %s answered payment %s with charge %s; its row is id %d, order %d, status %s, charge %s",
			in.key, p.ID, p.ProviderChargeID, r.id, r.orderID, r.status.String, r.chargeID.String)
	}
	if len(charges) != 1 {
		v.add("charges", "createPayment %s succeeded with %d provider charges (want exactly 1)", in.key, len(charges))
		return false
	}
	if c := charges[0]; c.voided || c.id != r.chargeID.String || strconv.Itoa(c.orderID) != in.orderID || c.amount != in.amount || c.tenant != in.tenant {
		v.add("charges", "createPayment %s: the provider's charge %s (order %d, amount %d) is not the payment's (charge %s, order %s, amount %d)",
			in.key, c.id, c.orderID, c.amount, r.chargeID.String, in.orderID, in.amount)
	}
	return false
}

// auditReplays sends every answered intent once more, to a server started
// for the audit, and checks that it gets the stored answer back: the same
// data bytes, marked replayed (an "executed" here would mean the key had
// been forgotten and the mutation ran again).
func auditReplays(ctx context.Context, c *client, server int, intents []*intent, v *violations) int {
	work := make(chan *intent)
	var (
		wg sync.WaitGroup
		mu sync.Mutex
		n  int
	)
	for range 16 {
		wg.Go(func() {
			for in := range work {
				want, ok := in.result()
				if !ok {
					continue
				}
				got, ok := replayOnce(ctx, c, server, in)
				if !ok {
					v.add("replay-failed", "%s %s: no final answer from the audit server", in.field, in.key)
					continue
				}
				mu.Lock()
				n++
				mu.Unlock()
				if got.kind != "replayed" && outcomeClass(got.kind) == "success" {
					v.add("re-executed", "%s %s: the audit's replay was %s", in.field, in.key, got.kind)
				}
				if !got.same(want) {
					v.add("replay-differs", "%s %s: clients got %s %s, the audit's replay %s %s", in.field, in.key, want.kind, want.data, got.kind, got.data)
				}
			}
		})
	}
	for _, in := range intents {
		work <- in
	}
	close(work)
	wg.Wait()
	return n
}

// replayOnce sends an intent's body until a final answer (a few tries: the
// audit server has no faults, so only a pending key would need more, and
// that is a violation reported elsewhere).
func replayOnce(ctx context.Context, c *client, server int, in *intent) (answer, bool) {
	for try := range 5 {
		// Not marked as retries: the audit's replays take the claim-first
		// path, the load's retries the lookup-first one.
		r := c.attempt(ctx, server, in.field, in.tenant, in.body, 10*time.Second, 0)
		if r.final {
			return answer{kind: r.kind, data: r.data, server: server}, true
		}
		time.Sleep(time.Duration(try+1) * 100 * time.Millisecond)
	}
	return answer{}, false
}

// awaitReceipts waits, for a minute at most, until the outbox has no
// receipt left to deliver (a job a killed server was running is run again
// once it is taken for stuck), and returns how long it took (-1 if it did
// not happen).
func awaitReceipts(ctx context.Context, db *database) time.Duration {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	return awaitNone(ctx, db, db.engine.pendingReceipts)
}

// awaitRecovery waits until no payment is pending (every intent that still
// retries has its answer by now, so what is left is the recoverer's work)
// or ctx ends, and returns how long it took (-1 if it did not happen).
func awaitRecovery(ctx context.Context, db *database) time.Duration {
	return awaitNone(ctx, db, `SELECT count(*) FROM payments WHERE idempotency_status = 'pending'`)
}

// awaitNone polls count, a query of one count, until it answers 0 or ctx
// ends, and returns how long it took (-1 if it did not happen).
func awaitNone(ctx context.Context, db *database, count string) time.Duration {
	start := time.Now()
	sdb, err := db.open()
	if err != nil {
		return -1
	}
	defer sdb.Close()
	for {
		var n int
		err := sdb.QueryRowContext(ctx, count).Scan(&n)
		if err == nil && n == 0 {
			return time.Since(start)
		}
		select {
		case <-ctx.Done():
			return -1
		case <-time.After(100 * time.Millisecond):
		}
	}
}
