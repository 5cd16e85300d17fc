// Measures which browser storage keeps a write when Chromium is killed
// with SIGKILL soon after it: a page writes one item to localStorage and
// one record to IndexedDB (a transaction with durability "strict", awaited
// until complete), the browser process is killed DELAY ms later, started
// again on the same profile, and the page reads both back. Prints the
// survivals out of ROUNDS. docs/clients.md gives the figures.
//
//   node scripts/measure-storage.mjs [ROUNDS=10] [DELAY=1000]
import { mkdtempSync, rmSync } from "node:fs";
import http from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { launchChromium } from "../test/harness.mjs";

const rounds = Number(process.argv[2] ?? 10);
const delay = Number(process.argv[3] ?? 1000);
const server = http.createServer((_req, res) => res.end("<!doctype html><title>storage</title>"));
await new Promise((r) => server.listen(0, "127.0.0.1", r));
const origin = `http://127.0.0.1:${server.address().port}/`;

const write = (value) =>
  new Promise((resolve, reject) => {
    localStorage.setItem("probe", value);
    const req = indexedDB.open("probe", 1);
    req.onupgradeneeded = () => req.result.createObjectStore("s");
    req.onerror = () => reject(req.error);
    req.onsuccess = () => {
      const tx = req.result.transaction("s", "readwrite", { durability: "strict" });
      tx.objectStore("s").put(value, "probe");
      tx.oncomplete = () => resolve();
      tx.onerror = () => reject(tx.error);
    };
  });
const read = () =>
  new Promise((resolve, reject) => {
    const local = localStorage.getItem("probe");
    const req = indexedDB.open("probe", 1);
    req.onupgradeneeded = () => req.result.createObjectStore("s");
    req.onerror = () => reject(req.error);
    req.onsuccess = () => {
      const get = req.result.transaction("s", "readonly").objectStore("s").get("probe");
      get.onsuccess = () => resolve({ local, idb: get.result ?? null });
      get.onerror = () => reject(get.error);
    };
  });

let local = 0;
let idb = 0;
for (let i = 0; i < rounds; i++) {
  const cleanups = [];
  const t = { after: (fn) => cleanups.push(fn) };
  const profile = mkdtempSync(join(tmpdir(), "idem-storage-"));
  const value = `v${i}-${Date.now()}`;
  try {
    let chrome = await launchChromium(t, profile);
    let page = await chrome.context.newPage();
    await page.goto(origin);
    await page.evaluate(write, value);
    await new Promise((r) => setTimeout(r, delay)); // the measured interval itself
    await chrome.kill();
    chrome = await launchChromium(t, profile);
    page = await chrome.context.newPage();
    await page.goto(origin);
    const got = await page.evaluate(read);
    if (got.local === value) local++;
    if (got.idb === value) idb++;
    console.log(`round ${i + 1}: localStorage ${got.local === value ? "kept" : "lost"}, IndexedDB ${got.idb === value ? "kept" : "lost"}`);
  } finally {
    for (const fn of cleanups.reverse()) await fn();
    rmSync(profile, { recursive: true, force: true });
  }
}
console.log(`SIGKILL ${delay} ms after the write: localStorage kept ${local}/${rounds}, IndexedDB (strict, completed) kept ${idb}/${rounds}`);
server.close();
