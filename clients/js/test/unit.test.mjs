// The parts that need no server: the classification of answers, the
// backoff, keys, reading a document, the storages and the intents' rules.

import assert from "node:assert/strict";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, test } from "node:test";

import {
  allCodes,
  classify,
  Code,
  createFetch,
  indexedDBStorage,
  Intents,
  isFinalCode,
  isRetryableCode,
  keyHeaderValue,
  memoryStorage,
  newKey,
  retryableCodes,
  webStorage,
} from "../dist/index.js";
import { declaresVariable, operationType } from "../dist/document.js";
import { singleFlight } from "../dist/intents.js";
import { fileStorage } from "../dist/node.js";
import { backoff } from "../dist/retry.js";

const reply = (errors, extra = {}) => ({ status: 200, body: { data: null, errors }, ...extra });
const err = (code, extensions = {}) => ({ message: code, extensions: { code, ...extensions } });

describe("classify", () => {
  test("every code of the server is retried or final, as Go's idemcode says", () => {
    for (const code of allCodes) {
      const v = classify(reply([err(code)]));
      assert.equal(v.reason !== undefined, retryableCodes.includes(code), code);
      assert.equal(isFinalCode(code), !isRetryableCode(code), code);
    }
    assert.deepEqual([...retryableCodes].sort(), [Code.InProgress, Code.InternalServerError, Code.Unavailable].sort());
  });

  test("a final code wins over another field's retryable one", () => {
    assert.equal(classify(reply([err(Code.InProgress, { retryAfterSeconds: 3 }), err(Code.KeyReused)])).reason, undefined);
  });

  test("an application's own code is final", () => {
    assert.equal(classify(reply([err("ORDER_ALREADY_PAID")])).reason, undefined);
  });

  test("IN_PROGRESS carries its hint; Retry-After too", () => {
    assert.deepEqual(classify(reply([err(Code.InProgress, { retryAfterSeconds: 2 })])), { reason: "in-progress", code: Code.InProgress, hint: 2000 });
    const headers = new Headers({ "Retry-After": "4" });
    assert.equal(classify(reply([err(Code.InProgress, { retryAfterSeconds: 2 })], { headers })).hint, 4000);
    assert.deepEqual(classify({ status: 503, headers }), { reason: "http-status", hint: 4000 });
  });

  test("a released field is retried; a body that is not GraphQL is final", () => {
    const released = { status: 200, body: { data: null, extensions: { idempotency: { pay: { key: "k", outcome: "released", replayed: false } } } } };
    assert.equal(classify(released).reason, "released");
    assert.equal(classify({ status: 500 }).reason, undefined);
    for (const status of [429, 502, 503, 504]) assert.equal(classify({ status }).reason, "http-status");
  });
});

test("backoff: full jitter under a doubling ceiling, a longer hint wins, both capped", () => {
  for (let n = 1; n <= 12; n++) {
    const d = backoff(n, 0, { baseBackoff: 100, maxBackoff: 1000 });
    assert.ok(d >= 0 && d <= Math.min(1000, 100 * 2 ** (n - 1)), `${n}: ${d}`);
  }
  assert.ok(backoff(1, 700, { baseBackoff: 100, maxBackoff: 1000 }) >= 700);
  assert.equal(backoff(1, 60_000, { baseBackoff: 100, maxBackoff: 1000 }), 1000);
});

test("keys: 26 base32 characters, all different; the header is an sf-string", () => {
  const keys = new Set(Array.from({ length: 1000 }, newKey));
  assert.equal(keys.size, 1000);
  for (const k of keys) assert.match(k, /^[A-Z2-7]{26}$/);
  assert.equal(keyHeaderValue("abc"), '"abc"');
  assert.equal(keyHeaderValue('a"b\\c'), '"a\\"b\\\\c"');
});

test("documents: the operation's type and the key variable", () => {
  assert.equal(operationType("mutation M($key: String) { a }"), "mutation");
  assert.equal(operationType("{ a }"), "query");
  assert.equal(operationType("# mutation\nquery Q { a }"), "query");
  assert.equal(operationType("fragment F on T { a } mutation M { ...F }"), "mutation");
  assert.equal(operationType('query Q($i: In = {a: "{"}) { a } mutation M { b }'), "query");
  assert.equal(operationType("query Q { a } mutation M { b }", "M"), "mutation");
  assert.ok(declaresVariable("mutation M($key: String) { a(k: $key) }", "key"));
  assert.ok(!declaresVariable('mutation M($keys: String) { a(k: "$key:") }', "key"));
});

describe("storages keep intents as JSON", () => {
  const fakeWeb = () => {
    const m = new Map();
    return {
      get length() {
        return m.size;
      },
      key: (i) => [...m.keys()][i] ?? null,
      getItem: (k) => m.get(k) ?? null,
      setItem: (k, v) => m.set(k, String(v)),
      removeItem: (k) => m.delete(k),
    };
  };
  const file = join(mkdtempSync(join(tmpdir(), "idem-unit-")), "sub", "intents.json");
  for (const [name, make] of [
    ["memory", () => memoryStorage()],
    ["web", () => webStorage(fakeWeb())],
    ["file", () => fileStorage(file)],
  ]) {
    test(name, async () => {
      const storage = make();
      const a = new Intents(storage);
      const x = await a.create({ name: "pay", meta: { orderID: "7" } });
      await x.record({ query: "mutation M($key: String) { a }", variables: { n: 1 } });
      const y = await a.create({ name: "other" });
      // Another store on the same storage: a reload, a second tab.
      const b = new Intents(storage);
      assert.deepEqual((await b.list()).map((i) => [i.key, i.name, i.sent]), [
        [x.key, "pay", true],
        [y.key, "other", false],
      ]);
      assert.deepEqual((await b.get(x.key)).request.variables, { n: 1 });
      await y.forget();
      assert.deepEqual((await b.list()).map((i) => i.key), [x.key]);
    });
  }

  test("the file is replaced whole, and concurrent writes all land", async () => {
    const path = join(mkdtempSync(join(tmpdir(), "idem-unit-")), "intents.json");
    const intents = new Intents(fileStorage(path));
    const made = await Promise.all(Array.from({ length: 20 }, () => intents.create()));
    assert.equal(Object.keys(JSON.parse(readFileSync(path, "utf8"))).length, 20);
    assert.equal((await new Intents(fileStorage(path)).list()).length, made.length);
  });
});

describe("intents", () => {
  test("getOrCreate finds the unfinished intent of an action after a reload, and makes a new one once it is settled", async () => {
    const storage = memoryStorage();
    const first = await new Intents(storage).getOrCreate({ name: "pay", meta: { order: 1 } });
    const reloaded = new Intents(storage);
    assert.equal((await reloaded.getOrCreate({ name: "pay", meta: { order: 1 } })).key, first.key);
    assert.notEqual((await reloaded.getOrCreate({ name: "pay", meta: { order: 2 } })).key, first.key);
    await first.forget();
    assert.notEqual((await reloaded.getOrCreate({ name: "pay", meta: { order: 1 } })).key, first.key);
  });

  test("the first request sent is the intent's; another one with its key does not replace it", async () => {
    const intents = new Intents();
    const i = await intents.create();
    assert.equal(await i.record({ query: "q", variables: { a: 1, b: 2 } }), true);
    assert.equal(await i.record({ query: "q", variables: { b: 2, a: 1 } }), true, "the same, keys in another order");
    assert.equal(await i.record({ query: "q", variables: { a: 2 } }), false);
    // Another tab's Intent object of the same key sees what was recorded.
    const other = await intents.get(i.key);
    assert.deepEqual(other.request.variables, { a: 1, b: 2 });
  });

  test("getOrCreate called twice at once (StrictMode, two components) makes one intent", async () => {
    const storage = memoryStorage();
    const got = await Promise.all(
      Array.from({ length: 4 }, (_, i) => new Intents(storage).getOrCreate({ name: "pay", meta: { order: 1, n: i % 1 } })),
    );
    assert.deepEqual(new Set(got.map((i) => i.key)).size, 1);
    assert.equal((await new Intents(storage).list()).length, 1);
  });

  test("getOrCreate prefers an unfinished sent intent over an older unsent one", async () => {
    const storage = memoryStorage();
    const intents = new Intents(storage);
    const unsent = await intents.create({ name: "pay", meta: { order: 1 } });
    const sent = await intents.create({ name: "pay", meta: { order: 1 } });
    await sent.record({ query: "mutation P($key: String) { pay }" });
    assert.ok(unsent.createdAt <= sent.createdAt);
    const found = await new Intents(storage).getOrCreate({ name: "pay", meta: { order: 1 } });
    assert.equal(found.key, sent.key, "the sent one, to resume");
    assert.equal(found.sent, true);
    assert.ok(found.sentAt);
  });

  test("an intent never sent expires; a sent one stays until its answer", async () => {
    const storage = memoryStorage();
    const old = new Date(Date.now() - 2 * 60_000).toISOString();
    storage.set({ key: "UNSENT", name: "pay", createdAt: old });
    storage.set({ key: "SENT", name: "pay", createdAt: old, request: { query: "mutation { a }" } });
    const intents = new Intents(storage, { unsentFor: 60_000 });
    assert.deepEqual((await intents.list()).map((i) => i.key), ["SENT"]);
    assert.equal(storage.get("UNSENT"), undefined, "removed from the storage");
    assert.equal((await new Intents(storage).list()).length, 1);
  });

  test("constructing without a browser does not throw (server-side rendering)", async () => {
    assert.equal(globalThis.localStorage, undefined);
    assert.equal(globalThis.indexedDB, undefined);
    const intents = new Intents(); // memory here, IndexedDB in a browser
    const web = webStorage();
    const idb = indexedDBStorage();
    assert.equal((await intents.create({ name: "x" })).key.length, 26);
    assert.throws(() => web.list(), /no localStorage/);
    await assert.rejects(async () => idb.list(), /no indexedDB/);
  });

  test("a sent intent always sends its recorded request, whatever the app sends now", async () => {
    const bodies = [];
    const send = createFetch({
      url: "http://server.invalid/query",
      fetch: async (_url, init) => {
        bodies.push(JSON.parse(init.body));
        return new Response(JSON.stringify({ data: { pay: { id: "1" } } }), { status: 200 });
      },
    });
    const intents = new Intents();
    const intent = await intents.create({ name: "pay" });
    // Recorded before a reload, with the document of that deploy.
    await intent.record({ query: "mutation Pay($key: String, $n: Int) { pay(key: $key, n: $n) { id } }", variables: { n: 1 } });
    const again = await intents.get(intent.key);
    // The new deploy's document selects more fields and the app passes other variables.
    await send({ query: "mutation Pay($key: String, $n: Int) { pay(key: $key, n: $n) { id amount } }", variables: { n: 2 }, intent: again });
    await send.resume(intent);
    assert.equal(bodies.length, 2);
    for (const b of bodies) {
      assert.equal(b.query, "mutation Pay($key: String, $n: Int) { pay(key: $key, n: $n) { id } }");
      assert.deepEqual(b.variables, { n: 1, key: intent.key });
    }
  });

  test("single flight: the same body joins the send in flight; another body does not", async () => {
    const intents = new Intents();
    const i = await intents.create();
    let sends = 0;
    let release;
    const gate = new Promise((r) => (release = r));
    const send = () => (sends++, gate.then(() => sends));
    const a = singleFlight(i, "body", send);
    const b = singleFlight(await intents.get(i.key), "body", send);
    const c = singleFlight(i, "other", send);
    release();
    assert.deepEqual(await Promise.all([a, b, c]), [2, 2, 2]);
    assert.equal(sends, 2);
    await singleFlight(i, "body", send);
    assert.equal(sends, 3, "after the answer, a new send");
  });
});
