// The package as a project outside this repository gets it: packed (npm
// pack), installed with docs/clients.md's install line into a fresh Vite +
// React + Apollo Client app (test/vite-app, dependencies from the npm
// registry), built by Vite, served on its own origin, and paying an order
// on the example server (-cors-origin) in Chromium. Slow (the registry
// installs Vite, React and Apollo: about a minute on a warm cache), so not
// in the test command: `npm run test:vite`.

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import http from "node:http";
import { tmpdir } from "node:os";
import { extname, join } from "node:path";
import { test } from "node:test";

import { backends, gql, jsRoot, launchChromium, removeProfile, newTenant, providerCharges, startServer } from "./harness.mjs";

const npm = (args, cwd) => execFileSync("npm", args, { cwd, encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] });

test("a fresh Vite + React + Apollo app installs the packed package and pays through it, cross-origin", { timeout: 600_000 }, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "idem-vite-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const pkg = JSON.parse(readFileSync(join(jsRoot, "package.json"), "utf8"));
  // npm pack: the release as the registry would hold it.
  const packed = JSON.parse(npm(["pack", "--json", "--pack-destination", dir], jsRoot))[0];
  const tarball = join(dir, packed.filename);
  t.diagnostic(`npm pack: ${packed.filename}, ${packed.size} bytes packed, ${packed.unpackedSize} unpacked, ${packed.entryCount} files`);

  const app = join(dir, "app");
  cpSync(join(jsRoot, "test", "vite-app"), app, { recursive: true });
  writeFileSync(join(app, "package.json"), JSON.stringify({ name: "shop", private: true, type: "module" }, null, 2));
  const started = Date.now();
  // The install lines of docs/clients.md.
  npm(["install", "--no-audit", "--no-fund", "--loglevel=error", "react", "react-dom", "@apollo/client", "graphql", "rxjs"], app);
  npm(["install", "--no-audit", "--no-fund", "--loglevel=error", "--save-dev", "vite"], app);
  npm(["install", "--no-audit", "--no-fund", "--loglevel=error", tarball], app);
  npm(["exec", "--", "vite", "build", "--logLevel", "error"], app);
  t.diagnostic(`installed and built in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  const installed = JSON.parse(readFileSync(join(app, "node_modules", "@goovo", "idem-client", "package.json"), "utf8"));
  assert.equal(installed.version, pkg.version);

  // The built app, served on its own origin.
  const dist = join(app, "dist");
  const types = { ".html": "text/html", ".js": "text/javascript", ".css": "text/css" };
  const site = http.createServer((req, res) => {
    const path = new URL(req.url, "http://x").pathname;
    const file = join(dist, path === "/" ? "index.html" : path);
    try {
      const body = readFileSync(file);
      res.writeHead(200, { "Content-Type": types[extname(file)] ?? "application/octet-stream" });
      res.end(body);
    } catch {
      res.writeHead(404).end();
    }
  });
  await new Promise((r) => site.listen(0, "127.0.0.1", r));
  t.after(() => new Promise((r) => (site.closeAllConnections(), site.close(r))));
  const origin = `http://127.0.0.1:${site.address().port}`;

  const server = await startServer(t, backends[0], ["-cors-origin", origin]);
  const tenant = newTenant("vite");
  const created = await gql(server.url, tenant, `mutation($key: String, $input: CreateOrderInput!) { createOrder(idempotencyKey: $key, input: $input) { id } }`, {
    key: `order-${tenant}`,
    input: { amount: 900, currency: "EUR" },
  });
  const orderID = created.data.createOrder.id;

  const profile = mkdtempSync(join(tmpdir(), "idem-vite-chromium-"));
  t.after(() => removeProfile(profile));
  const chrome = await launchChromium(t, profile);
  const page = await chrome.context.newPage();
  const failures = [];
  page.on("pageerror", (e) => failures.push(e.message));
  await page.goto(`${origin}/?server=${encodeURIComponent(server.base)}&tenant=${tenant}&order=${orderID}&amount=900`);
  await page.waitForSelector("#pay:not([disabled])");
  await page.dblclick("#pay");
  await page.waitForFunction(() => /^paid|^error/.test(document.getElementById("status").textContent));
  const status = await page.locator("#status").textContent();
  assert.match(status, /^paid: payment \d+, key [A-Z2-7]{26}$/);
  const charges = await providerCharges(server, tenant, orderID);
  assert.equal(charges.providerCharges.length, 1, "one charge for a double click");
  assert.equal(charges.order.paid, true);
  assert.deepEqual(failures, []);
  t.diagnostic(`the Vite app on ${origin} paid order ${orderID} on ${server.base}: ${status}`);
});
