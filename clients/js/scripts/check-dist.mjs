// Checks that dist/, which the repository ships so that a page can import
// the package without a bundler (and the example server embeds), is what
// `npm run build` makes of src/: compiles src/ into a scratch directory
// and compares file by file. Run by ./scripts/test.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
const scratch = mkdtempSync(join(tmpdir(), "idem-dist-"));
try {
  execFileSync(process.execPath, [join(root, "node_modules/typescript/bin/tsc"), "-p", join(root, "tsconfig.json"), "--outDir", scratch], {
    stdio: "inherit",
  });
  const want = readdirSync(scratch).sort();
  const have = readdirSync(join(root, "dist")).sort();
  const stale = [
    ...want.filter((f) => !have.includes(f)).map((f) => `dist/${f} is missing`),
    ...have.filter((f) => !want.includes(f)).map((f) => `dist/${f} is not built from src/`),
    ...want
      .filter((f) => have.includes(f) && !readFileSync(join(scratch, f)).equals(readFileSync(join(root, "dist", f))))
      .map((f) => `dist/${f} differs from what src/ compiles to`),
  ];
  if (stale.length > 0) {
    console.error(stale.join("\n") + "\nRun `npm run build` in clients/js and commit dist/.");
    process.exit(1);
  }
  console.log(`dist/ matches src/ (${want.length} files)`);
} finally {
  rmSync(scratch, { recursive: true, force: true });
}
