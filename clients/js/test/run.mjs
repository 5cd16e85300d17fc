// The package's tests: builds the example server and the schema helper
// once for every test file, then runs `node --test` on test/*.test.mjs,
// several files at a time (most of a test's time is spent waiting for the
// slowed provider, not on the CPU). Arguments go to node --test, such as
// a file to run alone.
import { spawnSync } from "node:child_process";
import { readdirSync } from "node:fs";
import { join } from "node:path";

import { buildBinaries, jsRoot, outputDir } from "./harness.mjs";

const started = Date.now();
const bins = buildBinaries(join(outputDir, "bin"));
console.log(`built the example server and test/pgschema in ${((Date.now() - started) / 1000).toFixed(1)} s`);
const args = process.argv.slice(2);
const files = args.some((a) => !a.startsWith("-"))
  ? []
  : readdirSync(join(jsRoot, "test"))
      .filter((f) => f.endsWith(".test.mjs"))
      .sort()
      .map((f) => join("test", f));
const res = spawnSync(process.execPath, ["--test", "--test-concurrency=3", "--test-timeout=120000", ...args, ...files], {
  cwd: jsRoot,
  stdio: "inherit",
  env: { ...process.env, IDEM_SERVER_BIN: bins.server, IDEM_PGSCHEMA_BIN: bins.pgschema },
});
console.log(`node --test: ${((Date.now() - started) / 1000).toFixed(1)} s in all`);
process.exit(res.status ?? 1);
