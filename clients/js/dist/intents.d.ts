import { type IntentRecord, type IntentRequest, type IntentStorage } from "./storage.js";
/** What an app says of a new intent. */
export interface IntentInit {
    /** What the action is ("pay"), to find the intent again after a reload. */
    name?: string;
    /** The app's JSON data, such as the order the payment is for. */
    meta?: unknown;
    /**
     * A key the app already has for this intent (from its own records).
     * Default: a new one, from {@link newKey}.
     */
    key?: string;
}
/**
 * The intents of an app, kept in a storage: create one when the user starts
 * an action (the form renders, the button is armed), hand it to every send
 * of that action, and list the unfinished ones after a reload to resume
 * them.
 *
 * A key per call is not enough: a double click is two calls, and a reload
 * forgets a key held in memory, so either would send the action again under
 * a new key, and the server would rightly run it twice. The intent holds
 * the key from the moment the action starts until a final answer, across
 * calls, retries and reloads.
 */
/** How {@link Intents} keeps its intents. */
export interface IntentsOptions {
    /**
     * How long an intent that was never sent is kept, in milliseconds: a form
     * armed and left is forgotten after this, when the intents are next
     * listed. An intent that was sent is kept until its final answer, however
     * long that takes. Default one day.
     */
    unsentFor?: number;
}
/** Defaults of {@link IntentsOptions}. */
export declare const IntentDefaults: {
    /** One day. */
    readonly unsentFor: number;
};
/**
 * The intents of an app, kept in a storage: create one when the user starts
 * an action (the form renders, the button is armed), hand it to every send
 * of that action, and list the unfinished ones after a reload to resume
 * them.
 *
 * A key per call is not enough: a double click is two calls, and a reload
 * forgets a key held in memory, so either would send the action again under
 * a new key, and the server would rightly run it twice. The intent holds
 * the key from the moment the action starts until a final answer, across
 * calls, retries, reloads and, with the default storage, a browser that was
 * killed.
 */
export declare class Intents {
    #private;
    /** Where the intents are kept. */
    readonly storage: IntentStorage;
    /**
     * storage defaults to {@link defaultStorage}: IndexedDB in a browser
     * (writes flushed to disk before a request leaves), memory elsewhere.
     * Constructing is safe without a browser (server-side rendering): the
     * storage is chosen on first use.
     */
    constructor(storage?: IntentStorage, options?: IntentsOptions);
    /**
     * Creates an intent and stores it before returning: its key is made now,
     * once, and every send of the intent uses it.
     */
    create(init?: IntentInit): Promise<Intent>;
    /**
     * The unfinished intent that has this name and meta (equal as JSON), or a
     * new one: what a form calls when it renders, so that after a reload the
     * same action gets the same key. An intent that was sent wins over one
     * that was not (its request may have been carried out: it is to be
     * resumed, not replaced), the oldest among equals.
     *
     * Calls for the same name and meta run one at a time, in this page and,
     * where the browser has Web Locks, across its tabs: two calls at once (a
     * component rendered twice, as React's StrictMode does) get the same
     * intent, not two.
     */
    getOrCreate(init: IntentInit & {
        name: string;
    }): Promise<Intent>;
    /** The intent with this key, if it is unfinished. */
    get(key: string): Promise<Intent | undefined>;
    /**
     * The unfinished intents, oldest first, or those of one name: after a
     * reload, the ones that were sent ({@link Intent.sent}) may have been
     * carried out or not, and sending them again (resume) finds out without
     * doing them twice.
     */
    list(filter?: {
        name?: string;
    }): Promise<Intent[]>;
}
/**
 * One action the user wants done once, and its idempotency key. Pass it to
 * a send (the fetch function's `intent`, Apollo's `context: { intent }`,
 * urql's context); the transport records the request in the intent's
 * storage before the first attempt leaves, retries with the key, and
 * forgets the intent when a final answer arrives.
 */
export declare class Intent {
    #private;
    /** The store the intent belongs to. */
    readonly intents: Intents;
    /** The idempotency key. */
    readonly key: string;
    readonly name: string | undefined;
    readonly meta: unknown;
    /** When the intent was created (RFC 3339). */
    readonly createdAt: string;
    /** Intents are made by {@link Intents.create} and read by {@link Intents.list}. */
    constructor(intents: Intents, record: IntentRecord);
    /**
     * The request the intent sends, once one was sent: the first send
     * records it, and resuming sends it again.
     */
    get request(): IntentRequest | undefined;
    /**
     * Whether a request of the intent may have reached the server: it was
     * recorded before its first attempt. An intent that was not sent can be
     * sent with any request; one that was must be resumed with the same.
     */
    get sent(): boolean;
    /** When the request was recorded, just before its first send (RFC 3339). */
    get sentAt(): string | undefined;
    /**
     * Removes the intent from its storage: the transports call it when a
     * final answer arrives; an app calls it when the user gives the action up.
     */
    forget(): Promise<void>;
    /**
     * Records request as the intent's request, in its storage, unless the
     * intent has one: the transports call it before the first attempt, and
     * send only once it resolved, that is once the storage holds it (with
     * IndexedDB, once the write's transaction completed, flushed to disk), so
     * that a reload, or a browser started again after a crash, finds what to
     * resume. It reports whether request is the
     * intent's request (a different one sent with the same key gets
     * IDEMPOTENCY_KEY_REUSED, an answer that does not settle the intent).
     */
    record(request: IntentRequest): Promise<boolean>;
    /** The intent as its storage keeps it. */
    toJSON(): IntentRecord;
}
/** JSON with object keys sorted, so that equal values print equal. */
export declare function canonical(v: unknown): string;
/**
 * Runs send for intent, or, when a send of the same body for the same key
 * is already in flight in this store, waits for that one's answer instead:
 * a double click makes one request. (Two stores on one storage, such as
 * two tabs, both send; the server answers the second with the first's
 * result.)
 */
export declare function singleFlight<T>(intent: Intent, body: string, send: () => Promise<T>): Promise<T>;
