// useIntent in a React app (test/react-app, bundled by esbuild) in
// Chromium, the page on another origin than the example server (started
// with -cors-origin): two components asking for the same intent, rendered
// at once under StrictMode (each mounted twice), get one intent; Pay, a
// reload while the provider is answering, and the intent found again is
// the sent one, which the page finishes with its key: one charge. On each
// backend; the provider's answer waits at a gate until the reload.

import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import http from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { before, describe, test } from "node:test";

import { build } from "esbuild";

import { backends, gql, jsRoot, launchChromium, removeProfile, newTenant, providerCharges, startGate, startServer, waitFor } from "./harness.mjs";

describe("useIntent in a React app, cross-origin", { concurrency: true }, () => {
  let bundle;
  before(async () => {
    const out = await build({
      entryPoints: [join(jsRoot, "test", "react-app", "app.jsx")],
      bundle: true,
      format: "esm",
      write: false,
      jsx: "automatic",
      define: { "process.env.NODE_ENV": '"development"' },
      logLevel: "error",
    });
    bundle = out.outputFiles[0].text;
  });

  for (const backend of backends) {
    test(`${backend}: StrictMode and two components make one intent; a reload mid-payment finds it sent and finishes it with its key`, async (t) => {
      const page0 = http.createServer((req, res) => {
        if (req.url.startsWith("/app.js")) {
          res.writeHead(200, { "Content-Type": "text/javascript" });
          return res.end(bundle);
        }
        res.writeHead(200, { "Content-Type": "text/html" });
        res.end('<!doctype html><meta charset="utf-8"><title>react app</title><div id="root"></div><script type="module" src="/app.js"></script>');
      });
      await new Promise((r) => page0.listen(0, "127.0.0.1", r));
      t.after(() => new Promise((r) => (page0.closeAllConnections(), page0.close(r))));
      const origin = `http://127.0.0.1:${page0.address().port}`;

      const gate = await startGate(t);
      gate.rule = () => "hold";
      const server = await startServer(t, backend, ["-provider-gate", gate.url, "-cors-origin", origin]);
      const tenant = newTenant("react");
      const created = await gql(server.url, tenant, `mutation($key: String, $input: CreateOrderInput!) { createOrder(idempotencyKey: $key, input: $input) { id } }`, {
        key: `order-${tenant}`,
        input: { amount: 700, currency: "EUR" },
      });
      const orderID = created.data.createOrder.id;

      const profile = mkdtempSync(join(tmpdir(), "idem-react-"));
      t.after(() => removeProfile(profile));
      const chrome = await launchChromium(t, profile);
      const page = await chrome.context.newPage();
      const failures = [];
      page.on("pageerror", (e) => failures.push(e.message));
      const keysSent = [];
      page.on("request", (r) => {
        const body = r.postData() ?? "";
        if (body.includes("createPayment")) keysSent.push(JSON.parse(body).variables.key);
      });
      const url = `${origin}/?server=${encodeURIComponent(server.base)}&tenant=${tenant}&order=${orderID}&amount=700`;
      const keys = async () => {
        await page.waitForFunction(() => document.getElementById("a")?.dataset.key && document.getElementById("b")?.dataset.key);
        return page.evaluate(() => ["a", "b"].map((id) => document.getElementById(id).dataset.key));
      };

      await page.goto(url);
      const [a, b] = await keys();
      assert.equal(a, b, "both components, each mounted twice, have one intent");
      assert.equal(await page.evaluate(async () => (await window.intents.list()).length), 1, "one intent stored");

      await page.click("#a button");
      await gate.next("the provider to charge the order", (c) => c.order === orderID);
      await page.reload();
      const [a2, b2] = await keys();
      assert.deepEqual([a2, b2], [a, a], "after the reload, the same intent");
      assert.equal(await page.locator("#a").getAttribute("data-sent"), "true", "found as sent, to be finished");
      assert.equal(await page.evaluate(async () => (await window.intents.list()).length), 1);
      gate.open();
      await page.click("#b button");
      await page.waitForFunction(() => /^paid|^error/.test(document.querySelector("#b .status").textContent));
      const status = await page.locator("#b .status").textContent();
      assert.match(status, new RegExp(`^paid: payment \\d+, key ${a}, echoed "${a}"$`), "paid with the key, the response's headers readable cross-origin");
      await waitFor("the intent to be settled", async () => (await page.evaluate(async () => (await window.intents.list()).length)) === 0);

      const charges = await providerCharges(server, tenant, orderID);
      assert.equal(charges.providerCharges.filter((c) => !c.voided).length, 1, "one live charge");
      assert.equal(charges.order.paid, true);
      assert.deepEqual([...new Set(keysSent)], [a], "every createPayment request carried the intent's key");
      t.diagnostic(`${backend}: ${keysSent.length} createPayment request(s) from ${origin} to ${server.base}, all with key ${a}; charges: ${charges.providerCharges.length}`);
      assert.deepEqual(failures, []);
    });
  }
});
