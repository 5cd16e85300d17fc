// The example's checkout page: create an order, pay it. Built on the
// JavaScript client's fetch function (served from ./idem/, the package's
// compiled modules), with intents kept in localStorage: each action gets
// its key when it is armed, and keeps it across double clicks, retries and
// reloads until the server's final answer.

import { createFetch, Intents, ResponseError, webStorage } from "./idem/index.js";

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
const intents = new Intents(webStorage(localStorage, "idem.checkout.intent."));
const tenant = () => localStorage.getItem("idem.checkout.tenant") || "demo";

const send = createFetch({
  url: "/query",
  headers: () => ({ "X-Tenant-ID": tenant() }),
  onRetry: (r) =>
    log(`attempt ${r.attempt} of ${short(r.key)}: ${r.reason}${r.code ? ` (${r.code})` : ""}; retrying in ${r.delay} ms with the same key`),
});

// The order on screen survives a reload, as the intents do. A stored
// value that is not an order of ours (edited by hand, from another page
// of this origin) is dropped, so that the page starts afresh instead of
// stopping at it.
function storedOrder() {
  try {
    const o = JSON.parse(localStorage.getItem("idem.checkout.order") || "null");
    if (o === null || (typeof o.id === "string" && /^[1-9][0-9]{0,9}$/.test(o.id))) return o;
  } catch {
    // not JSON
  }
  localStorage.removeItem("idem.checkout.order");
  return null;
}
let current = storedOrder();
let order = null; // as the server last answered
let orderIntent = null; // armed when the form renders
let payIntent = null; // armed when an unpaid order is shown

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
    payIntent = await intents.getOrCreate({ name: "pay", meta: { tenant: tenant(), orderID: current.id } });
  }
  $("pay-key").textContent = payIntent ? payIntent.key : "";
  show("pay-key-line", !!payIntent);
  $("pay").disabled = !payIntent;
  $("pay").textContent = order && !order.paid ? `Pay ${(order.amount / 100).toFixed(2)} ${order.currency}` : "Pay";
  show("new-order", !!current);
  $("create-order").disabled = !!current && !orderIntent.sent;
}

async function refresh() {
  if (!current) {
    order = null;
    show("order", false);
    $("charges-count").textContent = "–";
    $("charges").replaceChildren();
    return;
  }
  const res = await send({ query: ORDER, variables: { id: current.id } });
  order = res.data.order;
  if (!order) {
    current = null;
    localStorage.removeItem("idem.checkout.order");
    return refresh();
  }
  $("order-id").textContent = `#${order.id}`;
  $("order-amount").textContent = `${(order.amount / 100).toFixed(2)} ${order.currency}`;
  $("order-paid").textContent = order.paid ? "yes" : "no";
  show("order", true);
  const charges = res.data.providerCharges;
  $("charges-count").textContent = String(charges.length);
  $("charges-label").textContent = `charge${charges.length === 1 ? "" : "s"} for order #${order.id}`;
  $("charges").replaceChildren(
    ...charges.map((c) => {
      const tr = document.createElement("tr");
      for (const v of [c.id, `${(c.amount / 100).toFixed(2)} ${c.currency}`, short(c.idempotencyKey), c.requests, c.voided ? "yes" : "no"]) {
        const td = document.createElement("td");
        td.textContent = String(v);
        tr.append(td);
      }
      return tr;
    }),
  );
}

async function renderUnfinished() {
  const sent = (await intents.list()).filter((i) => i.sent && i.meta?.tenant === tenant());
  $("unfinished-list").replaceChildren(
    ...sent.map((intent) => {
      const li = document.createElement("li");
      const what = intent.name === "pay" ? `Payment of order #${intent.meta.orderID}` : "Order creation";
      li.append(`${what}, key `);
      const code = document.createElement("code");
      code.textContent = intent.key;
      const button = document.createElement("button");
      button.type = "button";
      button.className = "resume secondary";
      button.dataset.key = intent.key;
      button.textContent = "Resume";
      button.addEventListener("click", () => (intent.name === "pay" ? pay(intent) : createOrder(intent)));
      li.append(code, " ", button);
      return li;
    }),
  );
  show("unfinished", sent.length > 0);
}

async function createOrder(intent = orderIntent) {
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
    current = { id: res.data.createOrder.id };
    $("order-used-key").textContent = res.key;
    localStorage.setItem("idem.checkout.order", JSON.stringify(current));
    log(`order #${current.id} ${res.replayed ? "replayed" : "created"} after ${res.attempts} attempt(s)`);
    $("order-replayed").textContent = replayedText(res);
    show("payment", false);
    show("payment-error", false);
    $("pay-status").textContent = "";
  } catch (e) {
    $("order-error").textContent = describeError(e);
    show("order-error", true);
    log(`create order: ${describeError(e)}`);
  }
  await refresh();
  await arm();
  await renderUnfinished();
}

let inFlight = 0;
let clicks = 0;

async function pay(intent = payIntent) {
  if (!intent) return;
  const click = ++clicks;
  inFlight++;
  $("pay-status").textContent = "paying…";
  show("payment-error", false);
  const resuming = intent.sent && intent !== payIntent;
  log(
    inFlight > 1
      ? `click ${click}: pay again while the payment is on its way; same intent, same key ${short(intent.key)}`
      : resuming
        ? `click ${click}: resume the payment of order #${intent.meta.orderID}, sent before the page was left, with its key ${short(intent.key)}`
        : `click ${click}: pay order #${intent.meta.orderID} with key ${short(intent.key)}`,
  );
  try {
    const res = resuming
      ? await send.resume(intent)
      : await send({ query: PAY, variables: { input: { orderID: intent.meta.orderID, amount: order.amount } }, intent });
    const p = res.data.createPayment;
    $("payment-id").textContent = `#${p.id}`;
    $("payment-key").textContent = res.key;
    $("payment-charge").textContent = p.providerChargeID ?? "–";
    $("payment-replayed").textContent = replayedText(res);
    $("payment-attempts").textContent = String(res.attempts);
    show("payment", true);
    $("pay-status").textContent = "paid";
    log(`click ${click}: payment #${p.id} ${res.replayed ? "replayed" : "made"} after ${res.attempts} attempt(s)`);
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
}

async function init() {
  $("tenant").value = tenant();
  $("tenant").addEventListener("change", () => {
    localStorage.setItem("idem.checkout.tenant", $("tenant").value.trim() || "demo");
    localStorage.removeItem("idem.checkout.order");
    location.reload();
  });
  $("order-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    createOrder();
  });
  $("pay").addEventListener("click", () => pay());
  $("new-order").addEventListener("click", async () => {
    current = null;
    localStorage.removeItem("idem.checkout.order");
    show("payment", false);
    show("payment-error", false);
    $("order-replayed").textContent = "–";
    $("order-used-key").textContent = "–";
    $("pay-status").textContent = "";
    await refresh();
    await arm();
  });
  await refresh();
  await arm();
  await renderUnfinished();
  document.body.dataset.ready = "true";
}

init().catch((e) => log(`the page failed to start: ${e.message}`));
