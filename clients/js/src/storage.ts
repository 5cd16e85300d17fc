// Where intents live between the click and the final answer: memory, the
// browser's Web Storage or IndexedDB (and a file in Node, in ./node.ts).

/** The request an intent sends, recorded before its first send. */
export interface IntentRequest {
  /** The GraphQL document, printed. */
  query: string;
  /** Its variables, without the key. */
  variables?: Record<string, unknown>;
  operationName?: string;
}

/** An intent as its storage keeps it: plain JSON. */
export interface IntentRecord {
  /** The idempotency key, also the intent's id in its storage. */
  key: string;
  /** What the app calls the action ("pay"), to find the intent again. */
  name?: string;
  /** The app's own JSON data, such as the order the payment is for. */
  meta?: unknown;
  /** When the intent was created (RFC 3339). */
  createdAt: string;
  /** What the intent sends, once it was sent (or about to be). */
  request?: IntentRequest;
  /** When the request was recorded, just before its first send (RFC 3339). */
  sentAt?: string;
}

/**
 * Keeps intent records. Every method may be asynchronous; {@link Intents}
 * awaits each write before it sends anything, so that a record written is a
 * record a reload finds.
 */
export interface IntentStorage {
  get(key: string): Promise<IntentRecord | undefined> | IntentRecord | undefined;
  set(record: IntentRecord): Promise<void> | void;
  delete(key: string): Promise<void> | void;
  /** Every record, in any order. */
  list(): Promise<IntentRecord[]> | IntentRecord[];
}

/**
 * Keeps records in a Map: for Node processes, tests, and pages that need
 * no reload. Give several clients the same map to share their intents (two
 * "tabs", a client made again after a simulated reload).
 */
export function memoryStorage(map: Map<string, IntentRecord> = new Map()): IntentStorage {
  // Copies in and out, as a real storage would: a caller that changes an
  // object it got does not change what is stored.
  const copy = (r: IntentRecord): IntentRecord => JSON.parse(JSON.stringify(r));
  return {
    get: (key) => {
      const r = map.get(key);
      return r && copy(r);
    },
    set: (record) => void map.set(record.key, copy(record)),
    delete: (key) => void map.delete(key),
    list: () => [...map.values()].map(copy),
  };
}

/** The part of the Web Storage API (localStorage, sessionStorage) used. */
export interface WebStorageLike {
  readonly length: number;
  key(index: number): string | null;
  getItem(key: string): string | null;
  setItem(key: string, value: string): void;
  removeItem(key: string): void;
}

/**
 * Keeps records in Web Storage, one item per intent under prefix + key:
 * `localStorage` (the default; survives a reload and a closed tab, and is
 * shared by the tabs of the origin) or `sessionStorage` (survives a reload,
 * one tab only). Writes are synchronous, but Chromium writes them to disk
 * lazily: a browser killed (SIGKILL: a crash, the OS reclaiming memory, a
 * phone's browser killed in the background) seconds after the write loses
 * it, the intent and its key with it (docs/clients.md has the figures).
 * Use {@link indexedDBStorage}, the default in a browser, for intents that
 * must survive that.
 *
 * Without a storage argument, `localStorage` is looked up on first use,
 * not here: the call is safe where there is none (server-side rendering).
 */
export function webStorage(storage?: WebStorageLike, prefix = "idem.intent."): IntentStorage {
  const s = (): WebStorageLike => {
    const found = storage ?? globalThis.localStorage;
    if (!found) throw new TypeError("idem: webStorage: this environment has no localStorage (server-side rendering?); create intents in the browser");
    return found;
  };
  return {
    get: (key) => parse(s().getItem(prefix + key)),
    set: (record) => s().setItem(prefix + record.key, JSON.stringify(record)),
    delete: (key) => s().removeItem(prefix + key),
    list: () => {
      const st = s();
      const out: IntentRecord[] = [];
      for (let i = 0; i < st.length; i++) {
        const k = st.key(i);
        if (k?.startsWith(prefix)) {
          const r = parse(st.getItem(k));
          if (r) out.push(r);
        }
      }
      return out;
    },
  };
}

function parse(raw: string | null): IntentRecord | undefined {
  if (raw === null) return undefined;
  try {
    const r = JSON.parse(raw);
    return r && typeof r.key === "string" ? (r as IntentRecord) : undefined;
  } catch {
    return undefined; // not ours, or damaged: not an intent
  }
}

/**
 * Keeps records in IndexedDB (object store `store` of database `name`):
 * the default storage of {@link Intents} in a browser. Every write is a
 * transaction with `durability: "strict"`, and counts once the transaction
 * completed: the browser has then flushed it to disk, so a browser killed
 * right after (SIGKILL) still finds the intent on its next start, which a
 * write to `localStorage` does not promise (docs/clients.md has the
 * figures). The database is opened on first use; without a factory
 * argument `indexedDB` is looked up then, so the call is safe where there is
 * none (server-side rendering).
 */
export function indexedDBStorage(name = "idem", store = "intents", factory?: IDBFactory): IntentStorage {
  let db: Promise<IDBDatabase> | undefined;
  const open = () =>
    (db ??= new Promise<IDBDatabase>((resolve, reject) => {
      const f = factory ?? globalThis.indexedDB;
      if (!f) throw new TypeError("idem: indexedDBStorage: this environment has no indexedDB (server-side rendering?); create intents in the browser");
      const req = f.open(name, 1);
      req.onupgradeneeded = () => req.result.createObjectStore(store, { keyPath: "key" });
      req.onsuccess = () => {
        const d = req.result;
        // Another tab's newer version of the database: let it upgrade.
        d.onversionchange = () => {
          d.close();
          db = undefined;
        };
        resolve(d);
      };
      req.onerror = () => reject(req.error);
    }).catch((e: unknown) => {
      db = undefined; // a later call tries again
      throw e;
    }));
  const run = async <T>(mode: IDBTransactionMode, op: (s: IDBObjectStore) => IDBRequest): Promise<T> => {
    const tx = (await open()).transaction(store, mode, { durability: mode === "readwrite" ? "strict" : "default" });
    const req = op(tx.objectStore(store));
    return new Promise<T>((resolve, reject) => {
      // A write counts once its transaction committed, not when its request
      // succeeded: only then does a restarted browser find it.
      tx.oncomplete = () => resolve(req.result as T);
      tx.onerror = () => reject(tx.error);
      tx.onabort = () => reject(tx.error);
    });
  };
  return {
    get: (key) => run<IntentRecord | undefined>("readonly", (s) => s.get(key)),
    set: (record) => run<void>("readwrite", (s) => s.put(record)).then(() => undefined),
    delete: (key) => run<void>("readwrite", (s) => s.delete(key)).then(() => undefined),
    list: () => run<IntentRecord[]>("readonly", (s) => s.getAll()),
  };
}

/**
 * The storage {@link Intents} uses when given none: {@link indexedDBStorage}
 * where the environment has IndexedDB (a browser), else
 * {@link memoryStorage} (Node, server-side rendering, tests). Chosen on first
 * use, so that constructing intents at a module's top level is safe
 * everywhere.
 */
export function defaultStorage(): IntentStorage {
  let chosen: IntentStorage | undefined;
  const s = () => (chosen ??= globalThis.indexedDB ? indexedDBStorage() : memoryStorage());
  return {
    get: (key) => s().get(key),
    set: (record) => s().set(record),
    delete: (key) => s().delete(key),
    list: () => s().list(),
  };
}
