// The example's checkout page: create an order, pay it. Built on the
// JavaScript client's fetch function (served from ./idem/, the package's
// compiled modules), with intents kept in IndexedDB, each written to disk
// before its request leaves: each action gets its key when it is armed, and
// keeps it across double clicks, retries, reloads and a browser killed in
// the middle, until the server's final answer. The order on screen is kept
// the same way (and in the URL), so that a browser started again finds it,
// and the page finishes a payment it had sent.

import { createFetch, indexedDBStorage, Intents, ResponseError } from "./idem/index.js";

const CREATE_ORDER = `mutation CreateOrder($key: String, $input: CreateOrderInput!) {
  createOrder(idempotencyKey: $key, input: $input) { id amount currency paid }
}`;
const PAY = `mutation Pay($key: String, $input: CreatePaymentInput!) {
  createPayment(idempotencyKey: $key, input: $input) { id amount providerChargeID order { id paid } }
}`;
const ORDER = `query Order($id: ID!) {
  order(id: $id) { id amount currency paid }
  providerCharges(orderID: $id) { id amount currency idempotencyKey requests voided }
}`;

const $ = (id) => document.getElementById(id);
const intents = new Intents(indexedDBStorage("idem-checkout"));

// The page's own state (the tenant, the order on screen), in IndexedDB
// with the intents' durability: localStorage loses a write when the
// browser is killed within seconds of it.
const pageState = (() => {
  let db;
  const open = () =>
    (db ??= new Promise((resolve, reject) => {
      const req = indexedDB.open("idem-checkout-page", 1);
      req.onupgradeneeded = () => req.result.createObjectStore("state");
      req.onsuccess = () => resolve(req.result);
      req.onerror = () => reject(req.error);
    }));
  const run = async (mode, op) => {
    const tx = (await open()).transaction("state", mode, { durability: "strict" });
    const req = op(tx.objectStore("state"));
    return new Promise((resolve, reject) => {
      tx.oncomplete = () => resolve(req.result);
      tx.onerror = tx.onabort = () => reject(tx.error);
    });
  };
  return {
    get: (name) => run("readonly", (s) => s.get(name)),
    set: (name, value) => run("readwrite", (s) => (value === null ? s.delete(name) : s.put(value, name))),
  };
})();

let tenantName = "demo";
const tenant = () => tenantName;

const send = createFetch({
  url: "/query",
  headers: () => ({ "X-Tenant-ID": tenant() }),
  onRetry: (r) =>
    log(`attempt ${r.attempt} of ${short(r.key)}: ${r.reason}${r.code ? ` (${r.code})` : ""}; retrying in ${r.delay} ms with the same key`),
});

let current = null; // { id } of the order on screen: in the URL and pageState
let order = null; // as the server last answered
let orderIntent = null; // armed when the form renders
let payIntent = null; // armed when an unpaid order is shown

/** Shows order (or none) and keeps it where a restarted browser finds it. */
async function setCurrent(o) {
  current = o;
  const url = new URL(location.href);
  if (o) url.searchParams.set("order", o.id);
  else url.searchParams.delete("order");
  history.replaceState(null, "", url);
  await pageState.set(`order:${tenant()}`, o);
}

function money(amount, currency) {
  return `${(amount / 100).toFixed(2)} ${currency}`;
}

function short(key) {
  return key.slice(0, 8) + "…";
}

function log(text) {
  const li = document.createElement("li");
  li.textContent = `${new Date().toLocaleTimeString()} ${text}`;
  $("log").append(li);
  li.scrollIntoView({ block: "nearest" });
}

function show(id, on) {
  $(id).hidden = !on;
}

function describeError(e) {
  if (e instanceof ResponseError) return e.code ? `${e.code}: ${e.result.errors?.[0]?.message ?? ""}` : e.message;
  return `${e.message} (the intent is kept: resume it later)`;
}

function replayedText(res) {
  return res.replayed ? "yes: the stored answer of an earlier attempt; nothing ran again" : "no: it ran now";
}

async function arm() {
  orderIntent = await intents.getOrCreate({ name: "create-order", meta: { tenant: tenant() } });
  $("order-key").textContent = orderIntent.key;
  payIntent = null;
  if (current && order && !order.paid) {
    payIntent = await intents.getOrCreate({
      name: "pay",
      meta: { tenant: tenant(), orderID: current.id, amount: order.amount, currency: order.currency },
    });
  }
  $("pay-key").textContent = payIntent ? payIntent.key : "";
  show("pay-key-line", !!payIntent);
  $("pay").disabled = !payIntent;
  $("pay").textContent = order && !order.paid ? `Pay ${money(order.amount, order.currency)}` : "Pay";
  show("new-order", !!current);
  $("create-order").disabled = !!current && !orderIntent.sent;
}

async function refresh() {
  if (!current) {
    order = null;
    $("order-status").textContent = "";
    show("order", false);
    $("charges-count").textContent = "–";
    $("charges").replaceChildren();
    return;
  }
  const res = await send({ query: ORDER, variables: { id: current.id } });
  order = res.data.order;
  if (!order) {
    await setCurrent(null);
    return refresh();
  }
  $("order-id").textContent = `#${order.id}`;
  $("order-amount").textContent = money(order.amount, order.currency);
  $("order-paid").textContent = order.paid ? "yes" : "no";
  $("order-status").textContent = order.paid
    ? `Order #${order.id} is paid (${money(order.amount, order.currency)}).`
    : `Order #${order.id} is not paid yet.`;
  show("order", true);
  const charges = res.data.providerCharges;
  $("charges-count").textContent = String(charges.length);
  $("charges-label").textContent = `charge${charges.length === 1 ? "" : "s"} for order #${order.id}`;
  $("charges").replaceChildren(
    ...charges.map((c) => {
      const tr = document.createElement("tr");
      for (const v of [c.id, money(c.amount, c.currency), short(c.idempotencyKey), c.requests, c.voided ? "yes" : "no"]) {
        const td = document.createElement("td");
        td.textContent = String(v);
        tr.append(td);
      }
      return tr;
    }),
  );
}

/** In words, what an unfinished intent was. */
function describeIntent(intent) {
  return intent.name === "pay"
    ? `The payment of order #${intent.meta.orderID}${intent.meta.amount ? ` (${money(intent.meta.amount, intent.meta.currency)})` : ""}`
    : "Creating an order";
}

async function renderUnfinished(failed = new Map()) {
  const sent = (await intents.list()).filter((i) => i.sent && i.meta?.tenant === tenant());
  $("unfinished-list").replaceChildren(
    ...sent.map((intent) => {
      const li = document.createElement("li");
      li.append(
        `${describeIntent(intent)} was sent, but this page was closed before the answer came, so it is not known yet whether it went through. ` +
          (failed.has(intent.key)
            ? `Finishing it did not work yet (${failed.get(intent.key)}). Try again: it will not be carried out twice. `
            : "Finishing it now: it will not be carried out twice. "),
      );
      const button = document.createElement("button");
      button.type = "button";
      button.className = "resume secondary";
      button.dataset.key = intent.key;
      button.textContent = "Try again";
      button.hidden = !failed.has(intent.key);
      button.addEventListener("click", () => resumeAll([intent]));
      const code = document.createElement("code");
      code.textContent = intent.key;
      const small = document.createElement("small");
      small.append(" (key ", code, ") ");
      li.append(small, button);
      return li;
    }),
  );
  show("unfinished", sent.length > 0);
}

/**
 * Finishes the intents sent before the page was left (a reload, a closed
 * tab, a browser killed): each is sent again as it was first sent, with its
 * key; the server runs it if no attempt did, or replays the attempt's
 * answer. A payment is never made twice, and never left half done.
 */
async function resumeAll(list) {
  const failed = new Map();
  await renderUnfinished();
  for (const intent of list) {
    const ok = intent.name === "pay" ? await pay(intent, true) : await createOrder(intent);
    if (!ok) failed.set(intent.key, $(intent.name === "pay" ? "payment-error" : "order-error").textContent);
  }
  await renderUnfinished(failed);
  if (list.length > 0 && failed.size === 0) {
    $("resumed").textContent =
      list.length === 1
        ? `${describeIntent(list[0])}, sent before this page was closed, is finished: see below.`
        : `${list.length} actions sent before this page was closed are finished: see below.`;
    show("resumed", true);
  }
}

async function createOrder(intent = orderIntent) {
  let ok = false;
  show("order-error", false);
  log(`create order with key ${short(intent.key)}`);
  try {
    const res = intent.sent
      ? await send.resume(intent)
      : await send({
          query: CREATE_ORDER,
          variables: { input: { amount: Number($("amount").value), currency: $("currency").value.trim().toUpperCase() } },
          intent,
        });
    await setCurrent({ id: res.data.createOrder.id });
    $("order-used-key").textContent = res.key;
    log(`order #${current.id} ${res.replayed ? "replayed" : "created"} after ${res.attempts} attempt(s)`);
    $("order-replayed").textContent = replayedText(res);
    show("payment", false);
    show("payment-error", false);
    $("pay-status").textContent = "";
    ok = true;
  } catch (e) {
    $("order-error").textContent = describeError(e);
    show("order-error", true);
    log(`create order: ${describeError(e)}`);
  }
  await refresh();
  await arm();
  await renderUnfinished();
  return ok;
}

let inFlight = 0;
let clicks = 0;

async function pay(intent = payIntent, resumed = false) {
  if (!intent) return false;
  let ok = false;
  const click = resumed ? clicks : ++clicks;
  inFlight++;
  $("pay-status").textContent = "paying…";
  show("payment-error", false);
  const resuming = resumed || (intent.sent && intent.key !== payIntent?.key);
  log(
    inFlight > 1
      ? `click ${click}: pay again while the payment is on its way; same intent, same key ${short(intent.key)}`
      : resuming
        ? `resume the payment of order #${intent.meta.orderID}, sent before the page was left, with its key ${short(intent.key)}`
        : `click ${click}: pay order #${intent.meta.orderID} with key ${short(intent.key)}`,
  );
  try {
    const res = intent.sent
      ? await send.resume(intent)
      : await send({ query: PAY, variables: { input: { orderID: intent.meta.orderID, amount: intent.meta.amount } }, intent });
    const p = res.data.createPayment;
    $("payment-id").textContent = `#${p.id}`;
    $("payment-key").textContent = res.key;
    $("payment-charge").textContent = p.providerChargeID ?? "–";
    $("payment-replayed").textContent = replayedText(res);
    $("payment-attempts").textContent = String(res.attempts);
    show("payment", true);
    $("pay-status").textContent = "paid";
    $("payment-summary").textContent = res.replayed
      ? `Paid. The payment had already gone through (payment #${p.id}); it was not charged again.`
      : `Paid. Payment #${p.id} went through.`;
    log(`${resuming ? "resumed" : `click ${click}`}: payment #${p.id} ${res.replayed ? "replayed" : "made"} after ${res.attempts} attempt(s)`);
    ok = true;
  } catch (e) {
    $("payment-error").textContent = describeError(e);
    show("payment-error", true);
    $("pay-status").textContent = "";
    log(`click ${click}: ${describeError(e)}`);
  } finally {
    inFlight--;
  }
  await refresh();
  await arm();
  await renderUnfinished();
  return ok;
}

async function init() {
  tenantName = (await pageState.get("tenant")) || "demo";
  $("tenant").value = tenant();
  $("tenant").addEventListener("change", async () => {
    await pageState.set("tenant", $("tenant").value.trim() || "demo");
    await setCurrent(null);
    location.reload();
  });
  $("order-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    createOrder();
  });
  $("pay").addEventListener("click", () => pay());
  $("new-order").addEventListener("click", async () => {
    await setCurrent(null);
    show("payment", false);
    show("payment-error", false);
    show("resumed", false);
    $("payment-summary").textContent = "";
    $("order-replayed").textContent = "–";
    $("order-used-key").textContent = "–";
    $("pay-status").textContent = "";
    await refresh();
    await arm();
  });
  // The order on screen: the URL's, else the one this browser kept, else
  // the one of a payment sent before the page was left.
  const unfinished = (await intents.list()).filter((i) => i.sent && i.meta?.tenant === tenant());
  // A value that is not an order of ours (a URL edited by hand, a stored
  // value from another version of the page) is passed over, so that the
  // page starts afresh instead of stopping at it.
  const orderOf = (id) => (typeof id === "string" && /^[1-9][0-9]{0,9}$/.test(id) ? { id } : null);
  const pending = unfinished.find((i) => i.name === "pay");
  current =
    orderOf(new URL(location.href).searchParams.get("order")) ??
    orderOf((await pageState.get(`order:${tenant()}`))?.id) ??
    orderOf(pending?.meta?.orderID);
  await setCurrent(current);
  await refresh();
  await arm();
  await renderUnfinished();
  document.body.dataset.ready = "true";
  await resumeAll(unfinished);
  document.body.dataset.settled = "true";
}

init().catch((e) => log(`the page failed to start: ${e.message}`));
