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
 * one tab only). Writes are synchronous, so a record is stored before the
 * request leaves.
 */
export function webStorage(storage: WebStorageLike = globalThis.localStorage, prefix = "idem.intent."): IntentStorage {
  return {
    get: (key) => parse(storage.getItem(prefix + key)),
    set: (record) => storage.setItem(prefix + record.key, JSON.stringify(record)),
    delete: (key) => storage.removeItem(prefix + key),
    list: () => {
      const out: IntentRecord[] = [];
      for (let i = 0; i < storage.length; i++) {
        const k = storage.key(i);
        if (k?.startsWith(prefix)) {
          const r = parse(storage.getItem(k));
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
 * Keeps records in IndexedDB (object store `store` of database `name`),
 * for pages that keep many intents or use Web Storage for other things.
 * The database is opened on first use.
 */
export function indexedDBStorage(name = "idem", store = "intents", factory: IDBFactory = globalThis.indexedDB): IntentStorage {
  let db: Promise<IDBDatabase> | undefined;
  const open = () =>
    (db ??= new Promise<IDBDatabase>((resolve, reject) => {
      const req = factory.open(name, 1);
      req.onupgradeneeded = () => req.result.createObjectStore(store, { keyPath: "key" });
      req.onsuccess = () => resolve(req.result);
      req.onerror = () => reject(req.error);
    }));
  const run = async <T>(mode: IDBTransactionMode, op: (s: IDBObjectStore) => IDBRequest): Promise<T> => {
    const tx = (await open()).transaction(store, mode);
    const req = op(tx.objectStore(store));
    return new Promise<T>((resolve, reject) => {
      // A write counts once its transaction committed, not when its request
      // succeeded: only then does a reload find it.
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
