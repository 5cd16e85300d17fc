// Node's storage of intents: a JSON file, so that a process that restarts
// (a CLI run again, a worker redeployed) finds its unfinished intents.

import { mkdir, readFile, rename, writeFile } from "node:fs/promises";
import { dirname } from "node:path";

import type { IntentRecord, IntentStorage } from "./storage.js";

/**
 * Keeps intent records in one JSON file, written whole to a temporary file
 * and renamed over the old one, so that a crash leaves the old file or the
 * new one, never half of one. Writes of one storage are serialised; two
 * processes must not share a file.
 */
export function fileStorage(path: string): IntentStorage {
  let queue: Promise<unknown> = Promise.resolve();
  const load = async (): Promise<Record<string, IntentRecord>> => {
    try {
      return JSON.parse(await readFile(path, "utf8"));
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === "ENOENT") return {};
      throw e;
    }
  };
  const update = (change: (all: Record<string, IntentRecord>) => void): Promise<void> => {
    const next = queue.then(async () => {
      const all = await load();
      change(all);
      await mkdir(dirname(path), { recursive: true });
      const tmp = `${path}.${process.pid}.tmp`;
      await writeFile(tmp, JSON.stringify(all, null, 2));
      await rename(tmp, path);
    });
    queue = next.catch(() => {});
    return next;
  };
  const read = <T>(f: (all: Record<string, IntentRecord>) => T): Promise<T> => {
    const next = queue.then(async () => f(await load()));
    queue = next.catch(() => {});
    return next;
  };
  return {
    get: (key) => read((all) => all[key]),
    set: (record) => update((all) => void (all[record.key] = record)),
    delete: (key) => update((all) => void delete all[key]),
    list: () => read((all) => Object.values(all)),
  };
}
