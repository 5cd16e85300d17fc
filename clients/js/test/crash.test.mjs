// The checkout page when the browser dies in the middle of a payment: Pay,
// then the browser process killed with SIGKILL (a crash, the OS reclaiming
// memory, a phone's browser killed in the background) while the provider
// is answering, then Chromium started again on the same profile. The
// payment's intent was written to IndexedDB, flushed to disk, before its
// request left; the page started again finds it, and the order, and
// finishes the payment with its key: one live charge, the order paid. On
// each backend. The provider's answer waits at a gate (harness.mjs,
// startGate) until the browser is dead, so no latency decides the order of
// events. A screenshot of the page after the restart is kept in
// test-output/.

import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, test } from "node:test";

import { backends, chromiumPath, launchChromium, removeProfile, outputDir, providerCharges, startGate, startServer, waitFor } from "./harness.mjs";

describe("the checkout page after the browser was killed", { concurrency: true }, () => {
  for (const backend of backends) {
    test(`${backend}: Pay, SIGKILL while the provider answers, restart on the same profile: one live charge, the order paid`, async (t) => {
      assert.ok(existsSync(chromiumPath), `no browser at ${chromiumPath}: install Debian's chromium (./scripts/apt-install chromium) or set CHROMIUM`);
      const profile = mkdtempSync(join(tmpdir(), "idem-crash-"));
      t.after(() => removeProfile(profile));
      const gate = await startGate(t);
      gate.rule = () => "hold";
      const server = await startServer(t, backend, ["-provider-gate", gate.url]);

      let chrome = await launchChromium(t, profile);
      let page = await chrome.context.newPage();
      await page.goto(`${server.base}/checkout/`);
      await page.waitForSelector("body[data-ready=true]");
      await page.click("#create-order");
      await page.waitForFunction(() => !document.getElementById("order").hidden);
      const orderID = (await page.locator("#order-id").textContent()).replace("#", "");
      // The payment's intent is armed after the order shows (an IndexedDB
      // write): its key is on the page once Pay is enabled.
      await page.waitForFunction(() => document.getElementById("pay-key").textContent !== "");
      const key = await page.locator("#pay-key").textContent();
      await page.click("#pay");
      // The provider charged; its answer is held: the browser dies now.
      const charge = await gate.next("the provider to charge the order", (c) => c.order === orderID);
      assert.equal(charge.key !== "", true);
      assert.equal(await page.locator("#payment").isHidden(), true, "no answer before the kill");
      await chrome.kill();
      t.diagnostic(`${backend}: Chromium (pid ${chrome.pid}) killed with SIGKILL while the provider held order ${orderID}'s charge`);
      gate.open();

      // The same profile, as a person starting the browser again would.
      chrome = await launchChromium(t, profile);
      page = await chrome.context.newPage();
      const failures = [];
      page.on("pageerror", (e) => failures.push(e.message));
      await page.goto(`${server.base}/checkout/`);
      await page.waitForSelector("body[data-settled=true]");
      await page.waitForFunction(() => document.getElementById("order-paid").textContent === "yes");
      assert.equal(await page.locator("#order-id").textContent(), `#${orderID}`, "the restarted page shows the order");
      const status = await page.locator("#order-status").textContent();
      assert.match(status, /is paid/);
      assert.match(await page.locator("#resumed").textContent(), /payment of order #\d+.*sent before this page was closed, is finished/);
      assert.match(await page.locator("#payment-summary").textContent(), /^Paid\./);
      assert.equal(await page.locator("#payment-key").textContent(), key, "finished with the key it was sent with");
      await waitFor("the unfinished list to empty", () => page.locator("#unfinished").isHidden());
      const charges = await providerCharges(server, "demo", orderID);
      assert.equal(charges.providerCharges.filter((c) => !c.voided).length, 1, "one live charge");
      assert.equal(charges.order.paid, true);
      mkdirSync(outputDir, { recursive: true });
      const shot = join(outputDir, `checkout-${backend}-after-browser-kill.png`);
      await page.screenshot({ path: shot, fullPage: true });
      t.diagnostic(
        `${backend}: after the restart: ${charges.providerCharges.length} charge(s), ${charges.providerCharges.filter((c) => !c.voided).length} live, the provider asked ${charges.providerCharges[0].requests} time(s); replayed: ${await page.locator("#payment-replayed").textContent()}; screenshot ${shot}`,
      );
      assert.deepEqual(failures, []);
    });
  }
});
