// The checkout page (graph/checkout, served by the example server) in a
// real browser: Debian's Chromium, headless, driven over the DevTools
// protocol by playwright-core (no browser download). On each backend, with
// the provider's answers held at a gate (harness.mjs, startGate) until the
// page has done what the case needs: Pay double-clicked makes one charge;
// a reload while the payment is in flight makes one charge: the page
// finishes the payment it had sent, with its key.
// An order id that is not a number, in the URL (?order=abc) and in the
// page's stored state, is ignored: the page starts and creates and pays an
// order.
// No latency decides the order of events, so a busy machine cannot reorder
// them. Screenshots of the page after each payment are kept in
// test-output/.

import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";

import { chromium } from "playwright-core";

import { backends, outputDir, providerCharges, startGate, startServer, waitFor } from "./harness.mjs";

const executablePath = process.env.CHROMIUM ?? "/usr/bin/chromium";

describe("the checkout page in Chromium", { concurrency: true }, () => {
  let context;
  let profile;
  before(async () => {
    assert.ok(existsSync(executablePath), `no browser at ${executablePath}: install Debian's chromium (./scripts/apt-install chromium) or set CHROMIUM`);
    profile = mkdtempSync(join(tmpdir(), "idem-chromium-"));
    context = await chromium.launchPersistentContext(profile, {
      executablePath,
      headless: true,
      viewport: { width: 900, height: 1000 },
      args: [
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
      ],
    });
    // Upper bounds on waits for conditions, generous for a busy machine.
    context.setDefaultTimeout(60_000);
    context.setDefaultNavigationTimeout(60_000);
  });
  after(async () => {
    await context?.close();
    if (profile) rmSync(profile, { recursive: true, force: true });
  });

  for (const backend of backends) {
    test(`${backend}: Pay clicked twice is one charge; a reload during the payment, which the page finishes, is one charge`, async (t) => {
      // Every charge's answer waits at the gate until the test opens it.
      const gate = await startGate(t);
      gate.rule = () => "hold";
      const server = await startServer(t, backend, ["-provider-gate", gate.url]);
      const page = await context.newPage();
      t.after(() => page.close());
      const failures = [];
      page.on("pageerror", (e) => failures.push(e.message));
      const requests = [];
      page.on("request", (r) => requests.push({ url: r.url(), body: r.postData() ?? "" }));
      const payments = () => requests.filter((r) => r.body.includes("createPayment")).length;
      const text = (sel) => page.locator(sel).textContent();
      const visible = (id) => page.waitForFunction((id) => !document.getElementById(id).hidden, id);
      const logged = (re) => page.waitForFunction((re) => new RegExp(re).test(document.getElementById("log").textContent), re.source);

      await page.goto(`${server.base}/checkout`);
      await page.waitForSelector("body[data-ready=true]");

      // An order, then Pay double-clicked.
      await page.click("#create-order");
      await visible("order");
      const first = (await text("#order-id")).replace("#", "");
      await page.dblclick("#pay");
      // The payment is charged and its answer held until the page has seen
      // the second click, which joins the payment on its way.
      const charge = await gate.next("the first order's charge", (c) => c.order === first);
      await logged(/click 2: pay again while the payment is on its way/);
      charge.release();
      await visible("payment");
      await page.waitForFunction(() => document.getElementById("charges-count").textContent === "1");
      let charges = await providerCharges(server, "demo", first);
      assert.equal(charges.providerCharges.length, 1, "one charge for the double click");
      assert.equal(charges.order.paid, true);
      assert.equal(await text("#order-paid"), "yes");
      const clicks = (await text("#log")).match(/click \d+: pay (order|again)/g)?.length;
      assert.equal(clicks, 2, "the page saw two clicks");
      t.diagnostic(
        `${backend}: double click → ${clicks} clicks, ${payments()} createPayment request(s) from the browser, provider charges for order ${first}: ${charges.providerCharges.length}`,
      );
      mkdirSync(outputDir, { recursive: true });
      const shot = join(outputDir, `checkout-${backend}.png`);
      await page.screenshot({ path: shot, fullPage: true });
      t.diagnostic(`screenshot after the payment: ${shot}`);

      // A second order; Pay; reload once the provider charged, before its
      // answer arrives; then Resume.
      await page.click("#new-order");
      await page.click("#create-order");
      await page.waitForFunction((first) => document.getElementById("order-id").textContent !== `#${first}`, first);
      const second = (await text("#order-id")).replace("#", "");
      const before = payments();
      await page.click("#pay");
      const held = await gate.next("the provider to charge the second order", (c) => c.order === second);
      assert.equal((await providerCharges(server, "demo", second)).providerCharges.length, 1, "charged before the reload");
      assert.equal(await page.locator("#payment").isHidden(), true, "the answer has not arrived before the reload");
      await page.reload();
      await page.waitForSelector("body[data-ready=true]");
      // The page finds the payment it had sent, says so, and finishes it
      // with its key as soon as the provider answers.
      await visible("unfinished");
      assert.equal(await page.locator("#unfinished-list li").count(), 1, "one unfinished intent: the payment");
      assert.match(await text("#unfinished-list"), /payment of order #\d+ .*was sent, but this page was closed before the answer came/);
      gate.open();
      await visible("payment");
      await page.waitForFunction(() => document.getElementById("order-paid").textContent === "yes");
      charges = await providerCharges(server, "demo", second);
      assert.equal(charges.providerCharges.length, 1, "one charge after the reload and the resume");
      assert.equal(charges.providerCharges[0].voided, false);
      assert.equal(charges.order.paid, true);
      await page.waitForFunction(() => document.getElementById("unfinished").hidden);
      const resumed = join(outputDir, `checkout-${backend}-resumed.png`);
      await page.screenshot({ path: resumed, fullPage: true });
      t.diagnostic(`screenshot after the resumed payment: ${resumed}`);
      t.diagnostic(
        `${backend}: reload → ${payments() - before} createPayment request(s) from the browser (before and after the reload), provider charges for order ${second}: ${charges.providerCharges.length} (the provider was asked ${charges.providerCharges[0].requests} time(s)); replayed: ${await text("#payment-replayed")}`,
      );

      // On a phone (390 px wide) the keys, the provider's charge id and the
      // charges table wrap inside their cards: nothing is cut off.
      await page.setViewportSize({ width: 390, height: 844 });
      const overflow = await page.evaluate(() => {
        const out = [];
        if (document.documentElement.scrollWidth > window.innerWidth) out.push(`the page is ${document.documentElement.scrollWidth} px wide`);
        for (const card of document.querySelectorAll(".card")) {
          const box = card.getBoundingClientRect();
          for (const el of card.querySelectorAll("*")) {
            const r = el.getBoundingClientRect();
            if (r.width > 0 && (r.right > box.right + 0.5 || card.scrollWidth > card.clientWidth)) out.push(`${el.tagName}#${el.id} ${el.textContent.slice(0, 40)}`);
          }
        }
        return out;
      });
      assert.deepEqual(overflow, [], "everything fits at 390 px");
      const phone = join(outputDir, `checkout-${backend}-phone.png`);
      await page.screenshot({ path: phone, fullPage: true });
      t.diagnostic(`screenshot at 390 px: ${phone}`);
      await page.setViewportSize({ width: 900, height: 1000 });

      // The other browser storage, IndexedDB, keeps intents across stores
      // (a reload) too.
      const idb = await page.evaluate(async () => {
        const m = await import("/checkout/idem/index.js");
        const a = new m.Intents(m.indexedDBStorage("idem-test"));
        const intent = await a.create({ name: "x" });
        await intent.record({ query: "mutation { a }" });
        const listed = (await new m.Intents(m.indexedDBStorage("idem-test")).list()).map((i) => [i.key === intent.key, i.sent]);
        await intent.forget();
        return { listed, left: (await a.list()).length };
      });
      assert.deepEqual(idb, { listed: [[true, true]], left: 0 });

      // No bundler, no CDN: everything came from the example server.
      for (const r of requests) assert.ok(r.url.startsWith(server.base), `${r.url} is not the server's`);
      assert.deepEqual(failures, []);
    });
  }

  for (const backend of backends) {
    test(`${backend}: an order id that is not a number, in the URL or stored, does not stop the page`, async (t) => {
      const server = await startServer(t, backend);
      const page = await context.newPage();
      t.after(() => page.close());
      const failures = [];
      page.on("pageerror", (e) => failures.push(e.message));
      // The page's stored order (IndexedDB, where setCurrent keeps it)
      // corrupted: what an old version, an extension or a hand in DevTools
      // can leave there.
      await page.goto(`${server.base}/checkout/`);
      await page.waitForSelector("body[data-ready=true]");
      await page.evaluate(
        () =>
          new Promise((resolve, reject) => {
            const req = indexedDB.open("idem-checkout-page", 1);
            req.onerror = () => reject(req.error);
            req.onsuccess = () => {
              const tx = req.result.transaction("state", "readwrite");
              tx.objectStore("state").put({ id: "abc" }, "order:demo");
              tx.oncomplete = () => {
                req.result.close();
                resolve();
              };
              tx.onerror = () => reject(tx.error);
            };
          }),
      );
      for (const path of ["/checkout/?order=abc", "/checkout/"]) {
        await page.goto(`${server.base}${path}`);
        await page.waitForSelector("body[data-ready=true]", { timeout: 20_000 });
        assert.equal(await page.locator("#order").isHidden(), true, `${path}: no order shown`);
      }
      // And it still works: an order, created and paid.
      await page.click("#create-order");
      await page.waitForFunction(() => !document.getElementById("order").hidden);
      const id = (await page.locator("#order-id").textContent()).replace("#", "");
      assert.match(id, /^[1-9][0-9]*$/);
      await page.click("#pay");
      await page.waitForFunction(() => document.getElementById("order-paid").textContent === "yes");
      const charges = await providerCharges(server, "demo", id);
      assert.equal(charges.providerCharges.length, 1);
      assert.equal(charges.order.paid, true);
      assert.doesNotMatch(await page.locator("#log").textContent(), /strconv|failed to start/);
      assert.deepEqual(failures, []);
    });
  }
});
