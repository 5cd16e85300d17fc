// Intents: one business action the user wants done once, and its key.

import { newKey } from "./key.js";
import { defaultStorage, type IntentRecord, type IntentRequest, type IntentStorage } from "./storage.js";

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
export const IntentDefaults = {
  /** One day. */
  unsentFor: 24 * 60 * 60 * 1000,
} as const;

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
export class Intents {
  /** Where the intents are kept. */
  readonly storage: IntentStorage;
  readonly #unsentFor: number;

  /**
   * storage defaults to {@link defaultStorage}: IndexedDB in a browser
   * (writes flushed to disk before a request leaves), memory elsewhere.
   * Constructing is safe without a browser (server-side rendering): the
   * storage is chosen on first use.
   */
  constructor(storage: IntentStorage = defaultStorage(), options: IntentsOptions = {}) {
    this.storage = storage;
    this.#unsentFor = options.unsentFor ?? IntentDefaults.unsentFor;
  }

  /**
   * Creates an intent and stores it before returning: its key is made now,
   * once, and every send of the intent uses it.
   */
  async create(init: IntentInit = {}): Promise<Intent> {
    const record: IntentRecord = { key: init.key ?? newKey(), createdAt: new Date().toISOString() };
    if (init.name !== undefined) record.name = init.name;
    if (init.meta !== undefined) record.meta = init.meta;
    await this.storage.set(record);
    return new Intent(this, record);
  }

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
  async getOrCreate(init: IntentInit & { name: string }): Promise<Intent> {
    const meta = canonical(init.meta ?? null);
    return exclusive(`idem.intent:${init.name}:${meta}`, async () => {
      const same = (await this.list()).filter((i) => i.name === init.name && canonical(i.meta ?? null) === meta);
      return same.find((i) => i.sent) ?? same[0] ?? this.create(init);
    });
  }

  /** The intent with this key, if it is unfinished. */
  async get(key: string): Promise<Intent | undefined> {
    const r = await this.storage.get(key);
    return r && new Intent(this, r);
  }

  /**
   * The unfinished intents, oldest first, or those of one name: after a
   * reload, the ones that were sent ({@link Intent.sent}) may have been
   * carried out or not, and sending them again (resume) finds out without
   * doing them twice.
   */
  async list(filter: { name?: string } = {}): Promise<Intent[]> {
    const records = await this.storage.list();
    const stale = new Date(Date.now() - this.#unsentFor).toISOString();
    const kept: IntentRecord[] = [];
    for (const r of records) {
      // An intent armed and never sent, long ago: nothing to resume.
      if (!r.request && r.createdAt < stale) await this.storage.delete(r.key);
      else kept.push(r);
    }
    return kept
      .filter((r) => filter.name === undefined || r.name === filter.name)
      .sort((a, b) => (a.createdAt < b.createdAt ? -1 : a.createdAt > b.createdAt ? 1 : 0))
      .map((r) => new Intent(this, r));
  }
}

const chains = new Map<string, Promise<unknown>>();

/**
 * Runs fn alone among the calls with this name: after the ones before it in
 * this page, and inside a Web Lock of the name where the browser has them,
 * so that other tabs wait too.
 */
function exclusive<T>(name: string, fn: () => Promise<T>): Promise<T> {
  const locks = (globalThis.navigator as { locks?: { request(name: string, cb: () => Promise<T>): Promise<T> } } | undefined)?.locks;
  const run = locks ? () => locks.request(name, fn) : fn;
  const prev = chains.get(name) ?? Promise.resolve();
  const next = prev.then(run, run);
  const tail = next.catch(() => undefined);
  chains.set(name, tail);
  void tail.then(() => {
    if (chains.get(name) === tail) chains.delete(name);
  });
  return next;
}

/**
 * One action the user wants done once, and its idempotency key. Pass it to
 * a send (the fetch function's `intent`, Apollo's `context: { intent }`,
 * urql's context); the transport records the request in the intent's
 * storage before the first attempt leaves, retries with the key, and
 * forgets the intent when a final answer arrives.
 */
export class Intent {
  /** The store the intent belongs to. */
  readonly intents: Intents;
  /** The idempotency key. */
  readonly key: string;
  readonly name: string | undefined;
  readonly meta: unknown;
  /** When the intent was created (RFC 3339). */
  readonly createdAt: string;
  #request: IntentRequest | undefined;
  #sentAt: string | undefined;

  /** Intents are made by {@link Intents.create} and read by {@link Intents.list}. */
  constructor(intents: Intents, record: IntentRecord) {
    this.intents = intents;
    this.key = record.key;
    this.name = record.name;
    this.meta = record.meta;
    this.createdAt = record.createdAt;
    this.#request = record.request;
    this.#sentAt = record.sentAt;
  }

  /**
   * The request the intent sends, once one was sent: the first send
   * records it, and resuming sends it again.
   */
  get request(): IntentRequest | undefined {
    return this.#request;
  }

  /**
   * Whether a request of the intent may have reached the server: it was
   * recorded before its first attempt. An intent that was not sent can be
   * sent with any request; one that was must be resumed with the same.
   */
  get sent(): boolean {
    return this.#request !== undefined;
  }

  /** When the request was recorded, just before its first send (RFC 3339). */
  get sentAt(): string | undefined {
    return this.#sentAt;
  }

  /**
   * Removes the intent from its storage: the transports call it when a
   * final answer arrives; an app calls it when the user gives the action up.
   */
  async forget(): Promise<void> {
    await this.intents.storage.delete(this.key);
  }

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
  async record(request: IntentRequest): Promise<boolean> {
    if (this.#request) return sameRequest(this.#request, request);
    const stored = await this.intents.storage.get(this.key);
    if (stored?.request) {
      // Sent meanwhile by another Intent object (another tab) of the key.
      this.#request = stored.request;
      return sameRequest(stored.request, request);
    }
    const sentAt = new Date().toISOString();
    const record: IntentRecord = { ...this.toJSON(), request, sentAt };
    await this.intents.storage.set(record);
    this.#request = request;
    this.#sentAt = sentAt;
    return true;
  }

  /** The intent as its storage keeps it. */
  toJSON(): IntentRecord {
    const r: IntentRecord = { key: this.key, createdAt: this.createdAt };
    if (this.name !== undefined) r.name = this.name;
    if (this.meta !== undefined) r.meta = this.meta;
    if (this.#request) r.request = this.#request;
    if (this.#sentAt) r.sentAt = this.#sentAt;
    return r;
  }
}

function sameRequest(a: IntentRequest, b: IntentRequest): boolean {
  return canonical(a) === canonical(b);
}

/** JSON with object keys sorted, so that equal values print equal. */
export function canonical(v: unknown): string {
  return JSON.stringify(v, (_k, x) =>
    x && typeof x === "object" && !Array.isArray(x)
      ? Object.fromEntries(Object.entries(x).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : x,
  );
}

const inflight = new WeakMap<Intents, Map<string, { body: string; done: Promise<unknown> }>>();

/**
 * Runs send for intent, or, when a send of the same body for the same key
 * is already in flight in this store, waits for that one's answer instead:
 * a double click makes one request. (Two stores on one storage, such as
 * two tabs, both send; the server answers the second with the first's
 * result.)
 */
export function singleFlight<T>(intent: Intent, body: string, send: () => Promise<T>): Promise<T> {
  let m = inflight.get(intent.intents);
  if (!m) inflight.set(intent.intents, (m = new Map()));
  const cur = m.get(intent.key);
  if (cur && cur.body === body) return cur.done as Promise<T>;
  const done = send();
  const entry = { body, done };
  m.set(intent.key, entry);
  const clear = () => {
    if (m.get(intent.key) === entry) m.delete(intent.key);
  };
  done.then(clear, clear);
  return done;
}
