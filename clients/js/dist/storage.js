// Where intents live between the click and the final answer: memory, the
// browser's Web Storage or IndexedDB (and a file in Node, in ./node.ts).
/**
 * Keeps records in a Map: for Node processes, tests, and pages that need
 * no reload. Give several clients the same map to share their intents (two
 * "tabs", a client made again after a simulated reload).
 */
export function memoryStorage(map = new Map()) {
    // Copies in and out, as a real storage would: a caller that changes an
    // object it got does not change what is stored.
    const copy = (r) => JSON.parse(JSON.stringify(r));
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
export function webStorage(storage, prefix = "idem.intent.") {
    const s = () => {
        const found = storage ?? globalThis.localStorage;
        if (!found)
            throw new TypeError("idem: webStorage: this environment has no localStorage (server-side rendering?); create intents in the browser");
        return found;
    };
    return {
        get: (key) => parse(s().getItem(prefix + key)),
        set: (record) => s().setItem(prefix + record.key, JSON.stringify(record)),
        delete: (key) => s().removeItem(prefix + key),
        list: () => {
            const st = s();
            const out = [];
            for (let i = 0; i < st.length; i++) {
                const k = st.key(i);
                if (k?.startsWith(prefix)) {
                    const r = parse(st.getItem(k));
                    if (r)
                        out.push(r);
                }
            }
            return out;
        },
    };
}
function parse(raw) {
    if (raw === null)
        return undefined;
    try {
        const r = JSON.parse(raw);
        return r && typeof r.key === "string" ? r : undefined;
    }
    catch {
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
export function indexedDBStorage(name = "idem", store = "intents", factory) {
    let db;
    const open = () => (db ??= new Promise((resolve, reject) => {
        const f = factory ?? globalThis.indexedDB;
        if (!f)
            throw new TypeError("idem: indexedDBStorage: this environment has no indexedDB (server-side rendering?); create intents in the browser");
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
    }).catch((e) => {
        db = undefined; // a later call tries again
        throw e;
    }));
    const run = async (mode, op) => {
        const tx = (await open()).transaction(store, mode, { durability: mode === "readwrite" ? "strict" : "default" });
        const req = op(tx.objectStore(store));
        return new Promise((resolve, reject) => {
            // A write counts once its transaction committed, not when its request
            // succeeded: only then does a restarted browser find it.
            tx.oncomplete = () => resolve(req.result);
            tx.onerror = () => reject(tx.error);
            tx.onabort = () => reject(tx.error);
        });
    };
    return {
        get: (key) => run("readonly", (s) => s.get(key)),
        set: (record) => run("readwrite", (s) => s.put(record)).then(() => undefined),
        delete: (key) => run("readwrite", (s) => s.delete(key)).then(() => undefined),
        list: () => run("readonly", (s) => s.getAll()),
    };
}
/**
 * The storage {@link Intents} uses when given none: {@link indexedDBStorage}
 * where the environment has IndexedDB (a browser), else
 * {@link memoryStorage} (Node, server-side rendering, tests). Chosen on first
 * use, so that constructing intents at a module's top level is safe
 * everywhere.
 */
export function defaultStorage() {
    let chosen;
    const s = () => (chosen ??= globalThis.indexedDB ? indexedDBStorage() : memoryStorage());
    return {
        get: (key) => s().get(key),
        set: (record) => s().set(record),
        delete: (key) => s().delete(key),
        list: () => s().list(),
    };
}
