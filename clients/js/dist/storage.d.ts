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
 * one tab only). Writes are synchronous, so a record is stored before the
 * request leaves.
 */
export declare function webStorage(storage?: WebStorageLike, prefix?: string): IntentStorage;
/**
 * Keeps records in IndexedDB (object store `store` of database `name`),
 * for pages that keep many intents or use Web Storage for other things.
 * The database is opened on first use.
 */
export declare function indexedDBStorage(name?: string, store?: string, factory?: IDBFactory): IntentStorage;
