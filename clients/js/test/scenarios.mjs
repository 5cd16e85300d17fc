// The cases every transport must pass against the real example server, on
// SQLite and on PostgreSQL: answers lost after the server committed, one
// intent sent twice at once (from one client, from two tabs), a reload in
// the middle of a payment, IDEMPOTENCY_IN_PROGRESS's wait, final codes
// never retried, retryable ones retried, queries untouched, mutations
// without an intent. Each test has a tenant of its own and a proxy of its
// own in front of its backend's server. The tests that need a payment in
// flight (sent from two tabs, cut by a reload) have a server of their own
// whose provider's answers wait at a gate the test opens once it has done
// what it must while the payment is in flight: no latency decides the
// order of events, so a busy machine cannot reorder them. (On SQLite a held
// payment holds the one write lock, which would hold the other tests up.)

import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";

import { Intents, memoryStorage } from "../dist/index.js";
import { fileStorage } from "../dist/node.js";
import { backends, gql, newTenant, providerCharges, startGate, startProxy, startServer, waitFor } from "./harness.mjs";

const docs = {
  variable: {
    createOrder: `mutation CreateOrder($key: String, $input: CreateOrderInput!) {
      createOrder(idempotencyKey: $key, input: $input) { id amount currency paid }
    }`,
    pay: `mutation Pay($key: String, $input: CreatePaymentInput!) {
      createPayment(idempotencyKey: $key, input: $input) { id providerChargeID order { id paid } }
    }`,
    // The same mutation after a deploy that selects one more field.
    payV2: `mutation Pay($key: String, $input: CreatePaymentInput!) {
      createPayment(idempotencyKey: $key, input: $input) { id amount providerChargeID order { id paid } }
    }`,
  },
  // The key in the Idempotency-Key header: the documents do not mention it.
  header: {
    createOrder: `mutation CreateOrderH($input: CreateOrderInput!) {
      createOrder(input: $input) { id amount currency paid }
    }`,
    pay: `mutation PayH($input: CreatePaymentInput!) {
      createPayment(input: $input) { id providerChargeID order { id paid } }
    }`,
  },
};
const ORDER = `query Order($id: ID!) { order(id: $id) { id paid } }`;
const order1200 = { input: { amount: 1200, currency: "EUR" } };

/** Fast backoff: the tests wait for the server's hints, not for jitter. */
const fast = { baseBackoff: 20, maxBackoff: 5000 };

/** A new order of tenant, made directly (not through the client under test). */
async function newOrder(server, tenant) {
  const r = await gql(server.url, tenant, `mutation($k: String) { createOrder(idempotencyKey: $k, input: {amount: 1200, currency: "EUR"}) { id } }`, {
    k: `setup-${Math.random()}`,
  });
  return r.data.createOrder.id;
}

const codeOf = (ex) => ex.answer?.errors?.[0]?.extensions?.code;

/** Cleanups of a describe block's shared resources, run by its after hook. */
function scope() {
  const fns = [];
  return {
    after: (fn) => fns.push(fn),
    close: async () => {
      for (const fn of fns.reverse()) await fn();
    },
  };
}

export function scenarios(adapter) {
  describe(adapter.name, { concurrency: true }, () => {
    for (const backend of backends) {
      describe(backend, { concurrency: true }, () => {
        const shared = scope();
        after(() => shared.close());
        let server;
        before(async () => {
          server = await startServer(shared, backend);
        });
        /** A server of the test's own whose charges wait at a gate that holds them all. */
        const gatedServer = async (t) => {
          const gate = await startGate(t);
          gate.rule = () => "hold";
          return { gate, server: await startServer(t, backend, ["-provider-gate", gate.url]) };
        };

        for (const keyIn of ["variable", "header"]) {
          test(`answers lost after the server committed are retried with the same key: one order, one charge (key in the ${keyIn})`, async (t) => {
            const tenant = newTenant();
            const proxy = await startProxy(t, server.url);
            // Every first attempt's answer is lost; retries go through.
            proxy.rule = (ex) => (ex.retry === undefined && ex.body.query?.startsWith("mutation") ? "lose" : "forward");
            const intents = new Intents(memoryStorage());
            const client = adapter.make({ url: proxy.url, tenant, keyIn, ...fast });

            const orderIntent = await intents.create({ name: "create-order" });
            const o = await client.mutate({ query: docs[keyIn].createOrder, variables: order1200, intent: orderIntent });
            assert.ok(o.ok, String(o.error));
            const sentOrder = proxy.withKey(orderIntent.key);
            assert.equal(sentOrder.length, 2, "the lost attempt and one retry");
            assert.equal(sentOrder[0].fate, "lose");
            assert.equal(sentOrder[1].retry, "1", "the retry is marked Idempotency-Retry: 1");
            assert.deepEqual(sentOrder[1].body, sentOrder[0].body, "the same body");
            if (keyIn === "header") assert.equal(sentOrder[0].headers["idempotency-key"], `"${orderIntent.key}"`, "an sf-string");
            const orderID = o.data.createOrder.id;
            assert.equal(orderID, sentOrder[0].answer.data.createOrder.id, "the order of the lost answer, replayed");
            assert.equal(o.replayed, true);
            assert.equal((await gql(server.url, tenant, ORDER, { id: String(Number(orderID) + 1) })).data.order, null, "no second order");

            const payIntent = await intents.create({ name: "pay", meta: { orderID } });
            const p = await client.mutate({ query: docs[keyIn].pay, variables: { input: { orderID, amount: 1200 } }, intent: payIntent });
            assert.ok(p.ok, String(p.error));
            const sentPay = proxy.withKey(payIntent.key);
            assert.equal(sentPay.length, 2);
            assert.equal(p.data.createPayment.id, sentPay[0].answer.data.createPayment.id);
            assert.equal(p.replayed, true);
            const charges = await providerCharges(server, tenant, orderID);
            assert.equal(charges.providerCharges.length, 1, "one charge");
            assert.equal(charges.order.paid, true);
            assert.deepEqual(await intents.list(), [], "final answers settle the intents");
            t.diagnostic(
              `lost answers (${keyIn}): createOrder sent ${sentOrder.length}x → order ${orderID} (replayed); createPayment sent ${sentPay.length}x → provider charges: ${charges.providerCharges.length}`,
            );
          });
        }

        test("one intent sent twice at once from one client (a double click): one request, one payment", async (t) => {
          const tenant = newTenant();
          const proxy = await startProxy(t, server.url);
          const orderID = await newOrder(server, tenant);
          const intents = new Intents(memoryStorage());
          const client = adapter.make({ url: proxy.url, tenant, ...fast });
          const intent = await intents.create({ name: "pay", meta: { orderID } });
          const send = () => client.mutate({ query: docs.variable.pay, variables: { input: { orderID, amount: 1200 } }, intent });
          const [a, b] = await Promise.all([send(), send()]);
          assert.ok(a.ok && b.ok, String(a.error ?? b.error));
          assert.equal(a.data.createPayment.id, b.data.createPayment.id);
          assert.equal(proxy.withKey(intent.key).length, 1, "the second send joined the first");
          const charges = await providerCharges(server, tenant, orderID);
          assert.equal(charges.providerCharges.length, 1);
          t.diagnostic(`double submit, one client: ${proxy.withKey(intent.key).length} request → provider charges: ${charges.providerCharges.length}`);
        });

        test("one intent sent at once by two clients on one storage (two tabs): one payment; IN_PROGRESS waits for its Retry-After", async (t) => {
          const { gate, server } = await gatedServer(t);
          const tenant = newTenant();
          const proxy = await startProxy(t, server.url);
          const orderID = await newOrder(server, tenant);
          const storage = memoryStorage();
          const tabA = new Intents(storage);
          const tabB = new Intents(storage);
          const intentA = await tabA.create({ name: "pay", meta: { orderID } });
          const intentB = await tabB.get(intentA.key);
          assert.ok(intentB, "tab B finds tab A's intent in the shared storage");
          const clientA = adapter.make({ url: proxy.url, tenant, headers: { "X-Tab": "a" }, ...fast });
          const clientB = adapter.make({ url: proxy.url, tenant, headers: { "X-Tab": "b" }, ...fast });
          const variables = { input: { orderID, amount: 1200 } };
          const pa = clientA.mutate({ query: docs.variable.pay, variables, intent: intentA });
          // Tab A's payment is claimed and charged; its answer waits at the
          // gate until tab B has been told the key is in progress.
          const charge = await gate.next("tab A's charge", (c) => c.key === intentA.key);
          const pb = clientB.mutate({ query: docs.variable.pay, variables, intent: intentB });
          await waitFor("tab B to be told IDEMPOTENCY_IN_PROGRESS", () => {
            const answered = proxy.withKey(intentA.key).filter((e) => e.headers["x-tab"] === "b" && e.answeredAt !== undefined);
            const other = answered.find((e) => codeOf(e) !== "IDEMPOTENCY_IN_PROGRESS");
            if (other) throw Object.assign(new Error(`tab B was answered ${JSON.stringify(other.answer)}`), { fatal: true });
            return answered.length > 0;
          });
          charge.release();
          const [a, b] = await Promise.all([pa, pb]);
          assert.ok(a.ok && b.ok, String(a.error ?? b.error));
          assert.equal(a.data.createPayment.id, b.data.createPayment.id, "both tabs show the one payment");
          assert.equal([a.replayed, b.replayed].filter(Boolean).length, 1, "one ran it, the other got its stored result");

          const sent = proxy.withKey(intentA.key);
          const busy = sent.find((e) => codeOf(e) === "IDEMPOTENCY_IN_PROGRESS");
          assert.ok(busy, `one tab was told IDEMPOTENCY_IN_PROGRESS (${sent.map(codeOf).join(", ")})`);
          const seconds = busy.answer.errors[0].extensions.retryAfterSeconds;
          assert.ok(seconds >= 1, `retryAfterSeconds ${seconds}`);
          assert.equal(busy.retryAfter, String(seconds), "and the Retry-After header");
          const next = sent.find((e) => e.headers["x-tab"] === busy.headers["x-tab"] && e.sentAt > busy.answeredAt);
          assert.ok(next, "that tab retried");
          const waited = next.sentAt - busy.answeredAt;
          assert.ok(waited >= Math.min(seconds * 1000, fast.maxBackoff) - 5, `it retried after ${waited.toFixed(0)} ms, not after ${seconds} s`);
          assert.equal(next.retry, "1");
          assert.deepEqual(next.body, busy.body);
          const charges = await providerCharges(server, tenant, orderID);
          assert.equal(charges.providerCharges.length, 1, "one charge");
          t.diagnostic(
            `double submit, two tabs: ${sent.length} requests (IN_PROGRESS, retryAfterSeconds ${seconds}, waited ${waited.toFixed(0)} ms) → provider charges: ${charges.providerCharges.length}`,
          );
        });

        test("a reload while the payment is in flight: a new client on the same storage resumes the intent, one charge", async (t) => {
          const { gate, server } = await gatedServer(t);
          const tenant = newTenant();
          const proxy = await startProxy(t, server.url);
          const orderID = await newOrder(server, tenant);
          const file = join(mkdtempSync(join(tmpdir(), "idem-intents-")), "intents.json");
          const before = new Intents(fileStorage(file));
          const intent = await before.create({ name: "pay", meta: { orderID } });
          let held;
          proxy.rule = (ex) => (!held && ex.key === intent.key ? ((held = ex), "hold") : "forward");
          // The page before the reload: it never retries, it is gone.
          const gone = adapter.make({ url: proxy.url, tenant, maxAttempts: 1 });
          const pending = gone.mutate({ query: docs.variable.pay, variables: { input: { orderID, amount: 1200 } }, intent });
          // The provider charged; its answer waits at the gate, so the
          // server's answer cannot have left yet when the page is left.
          const charge = await gate.next("the provider to charge", (c) => c.key === intent.key);
          assert.equal((await providerCharges(server, tenant, orderID)).providerCharges.length, 1, "charged before the page is left");
          held.cut();
          const lost = await pending;
          assert.equal(lost.ok, false, "the page that was left got no answer");
          // Then the provider may answer. (Whether the server gave the
          // attempt up when its client left, or finishes it, the resume below
          // gets one charge: run again under the key, the provider
          // deduplicates; finished, it is replayed.)
          assert.ok(charge.key);
          gate.open();

          // The reload: a new store and client on the same file.
          const after = new Intents(fileStorage(file));
          const unfinished = await after.list();
          assert.deepEqual(
            unfinished.map((i) => [i.key, i.sent]),
            [[intent.key, true]],
            "the reloaded page finds the intent, sent and unfinished",
          );
          const client = adapter.make({ url: proxy.url, tenant, ...fast });
          // Resumed by an app whose deploy meanwhile changed the mutation's
          // fields: the intent's recorded request is sent, not the new one
          // (which the server would refuse under the key).
          const r = await client.resume(unfinished[0], docs.variable.payV2);
          const queries = [...new Set(proxy.withKey(intent.key).map((e) => e.body.query))];
          assert.equal(queries.length, 1, `every request of the key sent the recorded document: ${queries.join("\n---\n")}`);
          assert.doesNotMatch(queries[0], /\bamount\b/, "not the new deploy's document");
          assert.ok(r.ok, String(r.error));
          const charges = await providerCharges(server, tenant, orderID);
          assert.equal(charges.providerCharges.length, 1, "one charge");
          assert.equal(charges.providerCharges[0].voided, false);
          assert.equal(charges.providerCharges[0].idempotencyKey, intent.key, "charged under the intent's key");
          assert.equal(charges.order.paid, true);
          assert.deepEqual(await after.list(), [], "settled");
          t.diagnostic(
            `reload: ${proxy.withKey(intent.key).length} requests with the key (the first cut while in flight), resumed ${r.replayed ? "(replayed)" : "(ran again; the provider deduplicated)"} → provider charges: ${charges.providerCharges.length} (provider requests for it: ${charges.providerCharges[0].requests})`,
          );
        });

        describe("final answers are not retried, and settle the intent", { concurrency: true }, () => {
          const cases = [
            {
              code: "IDEMPOTENCY_KEY_REUSED",
              async run(client, intents) {
                const first = await intents.create();
                assert.ok((await client.mutate({ query: docs.variable.createOrder, variables: order1200, intent: first })).ok);
                // The same key for another request.
                const intent = await intents.create({ key: first.key });
                const r = await client.mutate({ query: docs.variable.createOrder, variables: { input: { amount: 999, currency: "EUR" } }, intent });
                return { r, intent, requests: 2 };
              },
            },
            {
              code: "IDEMPOTENCY_KEY_INVALID",
              async run(client, intents) {
                const intent = await intents.create({ key: "k".repeat(256) });
                return { r: await client.mutate({ query: docs.variable.createOrder, variables: order1200, intent }), intent, requests: 1 };
              },
            },
            {
              code: "BAD_USER_INPUT",
              async run(client, intents) {
                const intent = await intents.create();
                const r = await client.mutate({ query: docs.variable.createOrder, variables: { input: { amount: 1200, currency: "euro" } }, intent });
                return { r, intent, requests: 1 };
              },
            },
            {
              code: "ORDER_ALREADY_PAID", // the application's own code: final
              async run(client, intents, server, tenant) {
                const orderID = await newOrder(server, tenant);
                const variables = { input: { orderID, amount: 1200 } };
                assert.ok((await client.mutate({ query: docs.variable.pay, variables, intent: await intents.create() })).ok);
                const intent = await intents.create();
                return { r: await client.mutate({ query: docs.variable.pay, variables, intent }), intent, requests: 1 };
              },
            },
            {
              code: "GRAPHQL_VALIDATION_FAILED",
              async run(client, intents) {
                const intent = await intents.create();
                const query = `mutation Bad($key: String, $input: CreateOrderInput!) { createOrder(idempotencyKey: $key, input: $input) { id noSuchField } }`;
                return { r: await client.mutate({ query, variables: order1200, intent }), intent, requests: 1 };
              },
            },
          ];
          for (const c of cases) {
            test(c.code, async (t) => {
              const tenant = newTenant();
              const proxy = await startProxy(t, server.url);
              const intents = new Intents(memoryStorage());
              const client = adapter.make({ url: proxy.url, tenant, ...fast });
              const { r, intent, requests } = await c.run(client, intents, server, tenant);
              assert.equal(r.ok, false);
              assert.equal(r.code, c.code, String(r.error));
              assert.equal(proxy.withKey(intent.key).length, requests, "no retry");
              assert.equal(await intents.get(intent.key), undefined, "the intent is settled");
            });
          }
        });

        test("retryable answers (HTTP 503 with Retry-After, IDEMPOTENCY_UNAVAILABLE, INTERNAL_SERVER_ERROR) are retried with the same key", async (t) => {
          const tenant = newTenant();
          const proxy = await startProxy(t, server.url);
          const error = (code) => ({ status: 200, body: { data: null, errors: [{ message: "try again", extensions: { code } }] } });
          const fates = [{ status: 503, headers: { "Retry-After": "1" }, body: "busy" }, error("IDEMPOTENCY_UNAVAILABLE"), error("INTERNAL_SERVER_ERROR")];
          proxy.rule = (ex) => fates[ex.id] ?? "forward";
          const intents = new Intents(memoryStorage());
          const client = adapter.make({ url: proxy.url, tenant, ...fast });
          const intent = await intents.create();
          const r = await client.mutate({ query: docs.variable.createOrder, variables: order1200, intent });
          assert.ok(r.ok, String(r.error));
          const sent = proxy.withKey(intent.key);
          assert.deepEqual(
            sent.map((e) => e.retry),
            [undefined, "1", "2", "3"],
          );
          for (const e of sent) assert.deepEqual(e.body, sent[0].body);
          const waited = sent[1].sentAt - sent[0].answeredAt;
          assert.ok(waited >= 995, `Retry-After: 1 honoured (retried after ${waited.toFixed(0)} ms)`);
          assert.equal(r.replayed, false, "the fourth attempt ran it");
        });

        test("queries are sent as they are: no key, no retry", async (t) => {
          const tenant = newTenant();
          const orderID = await newOrder(server, tenant);
          const proxy = await startProxy(t, server.url);
          const client = adapter.make({ url: proxy.url, tenant, ...fast });
          assert.ok((await client.query({ query: ORDER, variables: { id: orderID } })).ok);
          proxy.rule = () => "lose";
          const r = await client.query({ query: ORDER, variables: { id: orderID } });
          assert.equal(r.ok, false, "a lost answer to a query is the caller's to handle");
          assert.equal(proxy.exchanges.length, 2, "not retried");
          for (const e of proxy.exchanges) {
            assert.equal(e.headers["idempotency-key"], undefined);
            assert.equal(e.headers["idempotency-retry"], undefined);
            assert.deepEqual(Object.keys(e.body.variables), ["id"]);
          }
        });

        test("a mutation without an intent gets a key for its call, and a warning: a second call is a second order", async (t) => {
          const tenant = newTenant();
          const proxy = await startProxy(t, server.url);
          proxy.rule = (ex) => (ex.id === 0 ? "lose" : "forward");
          const warnings = [];
          const client = adapter.make({ url: proxy.url, tenant, dev: true, warn: (m) => warnings.push(m), ...fast });
          const a = await client.mutate({ query: docs.variable.createOrder, variables: order1200 });
          const b = await client.mutate({ query: docs.variable.createOrder, variables: order1200 });
          assert.ok(a.ok && b.ok, String(a.error ?? b.error));
          const keys = proxy.exchanges.map((e) => e.key);
          assert.equal(keys.length, 3);
          assert.equal(keys[1], keys[0], "the call's retry kept its key");
          assert.notEqual(keys[2], keys[0], "the second call made a new key");
          assert.notEqual(a.data.createOrder.id, b.data.createOrder.id, "so the server made two orders");
          assert.equal(warnings.length, 1, "warned once");
          assert.match(warnings[0], /without an intent/);
        });
      });
    }
  });
}
