// Test support: the example server (cmd/server) as a real process on a
// fresh database of either backend, a proxy in front of it that records
// every request and can lose answers, and conditions to wait for. Every
// process and socket is released by the test's cleanup (t.after), however
// the test ends.

import { execFileSync, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import http from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

export const jsRoot = fileURLToPath(new URL("..", import.meta.url));
export const repoRoot = join(jsRoot, "..", "..");
export const outputDir = join(jsRoot, "test-output");

/** The backends every server test runs on. */
export const backends = ["sqlite", "postgres"];

let built;
/**
 * The binaries of cmd/server and test/pgschema: built by test/run.mjs once
 * for all test files (IDEM_SERVER_BIN, IDEM_PGSCHEMA_BIN), or here when a
 * file runs alone.
 */
export function binaries() {
  if (process.env.IDEM_SERVER_BIN && process.env.IDEM_PGSCHEMA_BIN) {
    return { server: process.env.IDEM_SERVER_BIN, pgschema: process.env.IDEM_PGSCHEMA_BIN };
  }
  return (built ??= buildBinaries(join(outputDir, "bin")));
}

export function buildBinaries(dir) {
  mkdirSync(dir, { recursive: true });
  const bins = { server: join(dir, "server"), pgschema: join(dir, "pgschema") };
  execFileSync("go", ["build", "-o", bins.server, "./cmd/server"], { cwd: repoRoot, stdio: "inherit" });
  execFileSync("go", ["build", "-o", bins.pgschema, "./clients/js/test/pgschema"], { cwd: repoRoot, stdio: "inherit" });
  return bins;
}

/**
 * Starts server listening on a port of 127.0.0.1 the system chooses; its
 * port. (A port found free and closed beforehand may be taken by another
 * process before it is listened on again: seen as EADDRINUSE under load.)
 */
async function listen(server) {
  await new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", resolve);
  });
  return server.address().port;
}

/**
 * Polls cond (sync or async) until it returns a truthy value, which it
 * returns; fails with what after timeout ms, or at once when cond throws
 * an error marked fatal. The interval is short: a test waits for its
 * condition, not for a guess of how long it takes.
 */
export async function waitFor(what, cond, timeout = 60_000) {
  const deadline = Date.now() + timeout;
  let last;
  for (;;) {
    try {
      const v = await cond();
      if (v) return v;
    } catch (e) {
      if (e.fatal) throw e;
      last = e;
    }
    if (Date.now() > deadline) throw new Error(`timed out after ${timeout} ms waiting for ${what}${last ? `: ${last.message}` : ""}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/**
 * A PostgreSQL schema of its own (test/pgschema): resolves to a
 * DATABASE_URL; the schema is dropped by the cleanup pushed on cleanups.
 */
async function pgSchema(cleanups) {
  const child = spawn(binaries().pgschema, [], { stdio: ["pipe", "pipe", "pipe"], env: process.env });
  let stderr = "";
  child.stderr.on("data", (d) => (stderr += d));
  const exited = new Promise((r) => child.once("exit", r));
  cleanups.push(async () => {
    child.stdin.end(); // pgschema drops the schema and exits
    await exited;
  });
  return await new Promise((resolve, reject) => {
    let out = "";
    child.stdout.on("data", (d) => {
      out += d;
      const nl = out.indexOf("\n");
      if (nl >= 0) resolve(out.slice(0, nl).trim());
    });
    child.once("exit", (code) => reject(new Error(`pgschema exited with ${code}: ${stderr}`)));
  });
}

/**
 * Starts the example server on a fresh database of backend, with args
 * (such as -provider-gate), on a port it takes itself (-addr …:0) and
 * names in its log, and waits until it answers GraphQL. When the test ends
 * the server is killed, then its database removed.
 */
export async function startServer(t, backend, args = []) {
  const cleanups = [];
  t.after(async () => {
    for (const fn of cleanups.reverse()) await fn();
  });
  const env = { ...process.env, DATABASE_URL: "" };
  const dir = mkdtempSync(join(tmpdir(), "idem-js-"));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const dbArgs = [];
  if (backend === "postgres") env.DATABASE_URL = await pgSchema(cleanups);
  else if (backend === "sqlite") dbArgs.push("-db", join(dir, "app.db"));
  else throw new Error(`unknown backend ${backend}`);
  const child = spawn(
    binaries().server,
    ["-addr", "127.0.0.1:0", "-materialize-every", "0", "-sweep-every", "0", ...dbArgs, ...args],
    { env, stdio: ["ignore", "ignore", "pipe"] },
  );
  let log = "";
  child.stderr.on("data", (d) => (log += d));
  let exit;
  const exited = new Promise((r) => child.once("exit", (code, signal) => r((exit = { code, signal }))));
  cleanups.push(async () => {
    if (!exit) child.kill("SIGKILL");
    await exited;
  });
  const failIfExited = () => {
    if (exit) throw Object.assign(new Error(`the server exited (${exit.code ?? exit.signal}):\n${log}`), { fatal: true });
  };
  // The start's log line: msg="serving GraphQL" url=http://127.0.0.1:PORT/query …
  const base = await waitFor(`the example server to listen (${backend})`, () => {
    failIfExited();
    return /msg="serving GraphQL" url=(http:\/\/\S+)\/query /.exec(log)?.[1];
  });
  await waitFor(`the server on ${base} (${backend})`, async () => {
    failIfExited();
    const res = await fetch(`${base}/query`, {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-Tenant-ID": "probe" },
      body: JSON.stringify({ query: "{ __typename }" }),
    });
    return res.ok;
  });
  return { base, url: `${base}/query`, backend, log: () => log };
}

/** Posts a GraphQL request to url as tenant; the parsed body. */
export async function gql(url, tenant, query, variables) {
  const res = await fetch(url, {
    method: "POST",
    headers: { "Content-Type": "application/json", "X-Tenant-ID": tenant },
    body: JSON.stringify({ query, variables }),
  });
  return res.json();
}

/** What the simulated provider recorded for an order. */
export async function providerCharges(server, tenant, orderID) {
  const r = await gql(server.url, tenant, `query($id: ID!) { providerCharges(orderID: $id) { id idempotencyKey requests voided } order(id: $id) { paid } }`, {
    id: orderID,
  });
  if (r.errors) throw new Error(JSON.stringify(r.errors));
  return r.data;
}

/**
 * Keeps the test's HTTP server from closing a keep-alive connection that
 * has been idle for a while (Node's keepAliveTimeout, 5 s): a client may
 * have sent its next request on it at that moment, and would see it fail
 * in transit. On a quiet machine the client closes first (fetch after 4 s);
 * on a busy one the process can stall past both, and the server's timer ran
 * first: a retry the test counted on was lost. Clients close idle
 * connections themselves, and the test's cleanup closes the rest.
 */
function neverCloseIdle(server) {
  server.keepAliveTimeout = 0;
}

/**
 * A proxy in front of the server at target that records every exchange and
 * does to each request what the test's rule says: rule(exchange) returns
 * "forward" (the default), "lose" (forward it, let the server answer in
 * full, then close the client's connection without the answer: the answer
 * is lost after the server committed), "hold" (forward it and keep the
 * answer back until the test calls the exchange's cut(), which closes both
 * connections: a reload or a closed tab while the server works), or
 * { status, headers, body } to answer in the server's place.
 *
 * exchanges[i] = { id, operation, key (from the header or the variables),
 * retry (Idempotency-Retry), headers, body, sentAt, answeredAt, status,
 * answer (the body the server gave, if any), fate }.
 */
export async function startProxy(t, target) {
  const exchanges = [];
  const proxy = { exchanges, rule: () => "forward", url: "" };
  const sockets = new Set();
  const server = http.createServer(async (req, res) => {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    const body = Buffer.concat(chunks).toString();
    let parsed = {};
    try {
      parsed = JSON.parse(body);
    } catch {}
    const header = req.headers["idempotency-key"];
    const ex = {
      id: exchanges.length,
      operation: parsed.operationName ?? /\b(?:mutation|query)\s+(\w+)/.exec(parsed.query ?? "")?.[1],
      key: header ? header.replace(/^"|"$/g, "") : parsed.variables?.key,
      retry: req.headers["idempotency-retry"],
      headers: req.headers,
      body: parsed,
      sentAt: performance.now(),
    };
    exchanges.push(ex);
    const fate = proxy.rule(ex) ?? "forward";
    ex.fate = typeof fate === "string" ? fate : "answered";
    if (typeof fate === "object") {
      ex.status = fate.status;
      ex.answeredAt = performance.now();
      res.writeHead(fate.status, { "Content-Type": "application/json", ...fate.headers });
      res.end(typeof fate.body === "string" ? fate.body : JSON.stringify(fate.body));
      return;
    }
    const up = http.request(new URL(req.url, target), { method: req.method, headers: req.headers });
    // "hold": the request goes on, its answer is kept from the client
    // until the test cuts both connections (a reload, a closed tab).
    ex.cut = () => {
      ex.cutAt = performance.now();
      up.destroy();
      req.socket.destroy();
    };
    up.on("response", async (ures) => {
      const parts = [];
      for await (const c of ures) parts.push(c);
      const text = Buffer.concat(parts).toString();
      ex.status = ures.statusCode;
      ex.answeredAt = performance.now();
      try {
        ex.answer = JSON.parse(text);
      } catch {}
      ex.retryAfter = ures.headers["retry-after"];
      if (fate === "lose") {
        req.socket.destroy();
        return;
      }
      if (fate === "hold") return;
      res.writeHead(ures.statusCode, ures.headers);
      res.end(text);
    });
    up.on("error", (e) => {
      ex.error ??= e.message;
      req.socket.destroy();
    });
    up.end(body);
  });
  server.on("connection", (s) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });
  neverCloseIdle(server);
  const port = await listen(server);
  t.after(
    () =>
      new Promise((r) => {
        for (const s of sockets) s.destroy();
        server.close(r);
      }),
  );
  proxy.url = `http://127.0.0.1:${port}/query`;
  /** The exchanges that sent key. */
  proxy.withKey = (key) => exchanges.filter((e) => e.key === key);
  return proxy;
}

/**
 * A gate for the example server's simulated provider (-provider-gate
 * gate.url): after each charge executed, the server asks the gate, and the
 * charge answers only once the gate answers. gate.rule(charge) says what to
 * do with each: "pass" (answer at once, the default) or "hold" (answer when
 * the test calls charge.release(), or gate.open()). A held payment is in
 * flight on the server, its money charged and its answer not yet given, for
 * exactly as long as the test needs: the ordering the test wants is a
 * condition, not a latency long enough on a quiet machine.
 *
 * charges[i] = { tenant, key, order, held, released, gone (the server gave
 * up waiting: its request's client went away), release() }. gate.next(what,
 * cond) waits for a charge matching cond and returns it; gate.open()
 * releases every held charge and passes the ones to come. The test's
 * cleanup releases whatever is still held.
 */
export async function startGate(t) {
  const charges = [];
  const gate = { charges, rule: () => "pass", url: "" };
  const server = http.createServer((req, res) => {
    const q = new URL(req.url, "http://gate").searchParams;
    const charge = { tenant: q.get("tenant"), key: q.get("key"), order: q.get("order"), held: false, released: false, gone: false };
    charge.release = () => {
      if (charge.released) return;
      charge.released = true;
      if (!charge.gone) res.end("go");
    };
    res.on("close", () => {
      if (!res.writableFinished) charge.gone = true;
    });
    charges.push(charge);
    if ((gate.rule(charge) ?? "pass") === "hold") charge.held = true;
    else charge.release();
  });
  neverCloseIdle(server);
  const port = await listen(server);
  gate.open = () => {
    gate.rule = () => "pass";
    for (const c of charges) c.release();
  };
  gate.next = (what, cond) => waitFor(what, () => charges.find(cond));
  t.after(
    () =>
      new Promise((r) => {
        gate.open();
        server.closeAllConnections();
        server.close(r);
      }),
  );
  gate.url = `http://127.0.0.1:${port}/charge`;
  return gate;
}

/** A tenant no other test uses: tests share servers, never data. */
export function newTenant(prefix = "t") {
  return `${prefix}-${Math.random().toString(36).slice(2, 10)}`;
}

export const chromiumPath = process.env.CHROMIUM ?? "/usr/bin/chromium";

/**
 * Debian's Chromium as a process of its own (its own process group), on
 * the profile directory profile, driven over the DevTools protocol by
 * playwright-core: unlike a browser playwright launches, it can be killed
 * with SIGKILL (kill()) as a crash or the OS would, and started again on the
 * same profile. Resolves to { browser, context, kill, close }; the test's
 * cleanup kills what is left.
 */
const running = new Map(); // profile → the kill of each Chromium on it

/**
 * Removes a profile directory made for launchChromium, once every Chromium
 * started on it is dead: for the test's cleanup.
 */
export async function removeProfile(profile) {
  for (const kill of running.get(profile) ?? []) await kill();
  running.delete(profile);
  rmSync(profile, { recursive: true, force: true });
}

export async function launchChromium(t, profile, { width = 900, height = 1000 } = {}) {
  const { chromium } = await import("playwright-core");
  const { readFileSync } = await import("node:fs");
  rmSync(join(profile, "DevToolsActivePort"), { force: true });
  const child = spawn(
    chromiumPath,
    [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--no-default-browser-check",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--hide-crash-restore-bubble",
      "--remote-debugging-port=0",
      `--window-size=${width},${height}`,
      `--user-data-dir=${profile}`,
      "about:blank",
    ],
    { detached: true, stdio: ["ignore", "ignore", "pipe"] },
  );
  let stderr = "";
  child.stderr.on("data", (d) => (stderr += d));
  let exit;
  const exited = new Promise((r) => child.once("exit", (code, signal) => r((exit = { code, signal }))));
  const kill = async () => {
    if (!exit) {
      try {
        process.kill(-child.pid, "SIGKILL"); // the browser and its renderers, at once
      } catch {}
    }
    await exited;
  };
  t.after(kill);
  running.set(profile, [...(running.get(profile) ?? []), kill]);
  const port = await waitFor("Chromium's DevTools port", () => {
    if (exit) throw Object.assign(new Error(`Chromium exited (${exit.code ?? exit.signal}):\n${stderr}`), { fatal: true });
    try {
      return Number(readFileSync(join(profile, "DevToolsActivePort"), "utf8").split("\n")[0]) || undefined;
    } catch {
      return undefined;
    }
  });
  const browser = await chromium.connectOverCDP(`http://127.0.0.1:${port}`);
  const context = browser.contexts()[0];
  context.setDefaultTimeout(60_000);
  context.setDefaultNavigationTimeout(60_000);
  return { browser, context, kill, pid: child.pid };
}
