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
export declare function memoryStorage(map?: Map<string, IntentRecord>): IntentStorage;
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
export declare function webStorage(storage?: WebStorageLike, prefix?: string): IntentStorage;
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
export declare function indexedDBStorage(name?: string, store?: string, factory?: IDBFactory): IntentStorage;
/**
 * The storage {@link Intents} uses when given none: {@link indexedDBStorage}
 * where the environment has IndexedDB (a browser), else
 * {@link memoryStorage} (Node, server-side rendering, tests). Chosen on first
 * use, so that constructing intents at a module's top level is safe
 * everywhere.
 */
export declare function defaultStorage(): IntentStorage;
