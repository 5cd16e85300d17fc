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
 * one tab only). Writes are synchronous, so a record is stored before the
 * request leaves.
 */
export function webStorage(storage = globalThis.localStorage, prefix = "idem.intent.") {
    return {
        get: (key) => parse(storage.getItem(prefix + key)),
        set: (record) => storage.setItem(prefix + record.key, JSON.stringify(record)),
        delete: (key) => storage.removeItem(prefix + key),
        list: () => {
            const out = [];
            for (let i = 0; i < storage.length; i++) {
                const k = storage.key(i);
                if (k?.startsWith(prefix)) {
                    const r = parse(storage.getItem(k));
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
 * Keeps records in IndexedDB (object store `store` of database `name`),
 * for pages that keep many intents or use Web Storage for other things.
 * The database is opened on first use.
 */
export function indexedDBStorage(name = "idem", store = "intents", factory = globalThis.indexedDB) {
    let db;
    const open = () => (db ??= new Promise((resolve, reject) => {
        const req = factory.open(name, 1);
        req.onupgradeneeded = () => req.result.createObjectStore(store, { keyPath: "key" });
        req.onsuccess = () => resolve(req.result);
        req.onerror = () => reject(req.error);
    }));
    const run = async (mode, op) => {
        const tx = (await open()).transaction(store, mode);
        const req = op(tx.objectStore(store));
        return new Promise((resolve, reject) => {
            // A write counts once its transaction committed, not when its request
            // succeeded: only then does a reload find it.
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
