// The framework-free client: a fetch function for GraphQL mutations that
// sends an intent's key and retries with it. The urql exchange sends
// through the same code.

import { declaresVariable, operationType } from "./document.js";
import { canonical, singleFlight, type Intent } from "./intents.js";
import { Header, keyHeaderValue, newKey } from "./key.js";
import {
  Defaults,
  idempotencyReports,
  isReplayed,
  parseBody,
  settle,
  type FieldReport,
  type GraphQLBody,
  type GraphQLErrorLike,
  type RetryOptions,
  type Settled,
} from "./retry.js";
import type { IntentRequest } from "./storage.js";

/** Where a transport puts the key, as the server is configured to read it. */
export interface KeyOptions {
  /**
   * "variable" (the default): the key is the GraphQL variable keyVariable,
   * which the mutation declares and passes on, as in
   * `mutation($key: String) { createOrder(idempotencyKey: $key, …) }`; a
   * mutation that does not declare it is not idempotent for the client:
   * sent once, as it is. "header": the key goes in the `Idempotency-Key`
   * header, as a structured-field string (`"…"`), for servers that accept
   * it there (idem's Config.KeyHeader); every mutation is idempotent then,
   * unless `isIdempotent` says otherwise.
   */
  keyIn?: "variable" | "header";
  /** The variable of keyIn "variable". Default "key". */
  keyVariable?: string;
}

/** What a transport says during development. */
export interface DevOptions {
  /**
   * Whether to warn about mutations sent without an intent (each then gets
   * a key of its own, which a second call does not share). Default: on,
   * unless `process.env.NODE_ENV` is "production" (which bundlers set).
   */
  dev?: boolean;
  /** Receives the warnings. Default console.warn. */
  warn?: (message: string) => void;
}

/** The fetch function's configuration. */
export interface FetchOptions extends RetryOptions, KeyOptions, DevOptions {
  /** The GraphQL endpoint, such as "/query". Relative URLs resolve against the page. */
  url: string | URL;
  /**
   * Headers of every request (authentication; the example server's
   * X-Tenant-ID), or a function that returns them, called once per send.
   */
  headers?: HeadersInit | (() => HeadersInit | Promise<HeadersInit>);
  /** The fetch to use. Default globalThis.fetch. */
  fetch?: typeof globalThis.fetch;
}

/** One GraphQL operation to send. */
export interface MutationRequest {
  query: string;
  variables?: Record<string, unknown>;
  operationName?: string;
  /**
   * The intent the mutation carries out. Without one, the mutation gets a
   * key for this call only (its retries share it; another call does not),
   * and a warning in development.
   */
  intent?: Intent;
  /** Headers of this request, after the configured ones. */
  headers?: HeadersInit;
  /**
   * Gives the send up: the attempt in flight is aborted, no other is made,
   * and the intent stays unfinished, to be resumed.
   */
  signal?: AbortSignal;
}

/** The final answer to a send. */
export interface MutationResult<TData = unknown> {
  data?: TData | null;
  errors?: ReadonlyArray<GraphQLErrorLike>;
  extensions?: Record<string, unknown>;
  /** What the server reports of each idempotent field, by response name. */
  idempotency: Record<string, FieldReport>;
  /**
   * Whether every idempotent field was replayed from an earlier request's
   * stored result (a retry, a second click, a resume after a reload): the
   * mutation was not run again.
   */
  replayed: boolean;
  /** Attempts made to get this answer. */
  attempts: number;
  /** HTTP status and headers of the answer. */
  status: number;
  headers: Headers;
  /** The idempotency key sent, if the operation is an idempotent mutation. */
  key?: string;
}

/**
 * The error of a send whose final answer is an error: GraphQL errors (a
 * refusal such as IDEMPOTENCY_KEY_REUSED, a business error the server
 * stored and replays, a validation error), an HTTP status other than 2xx,
 * or a body that is not a GraphQL response. The intent is settled: sending
 * it again gets the same answer. Any other error (RetriesExhaustedError,
 * the signal's reason) leaves it unfinished.
 */
export class ResponseError<TData = unknown> extends Error {
  override name = "ResponseError";
  readonly result: MutationResult<TData>;
  constructor(result: MutationResult<TData>, message?: string) {
    const first = result.errors?.[0];
    const code = first?.extensions?.["code"];
    super(
      "idem: " +
        (message ??
          (first
            ? `${typeof code === "string" ? code + ": " : ""}${first.message}${result.errors!.length > 1 ? ` (and ${result.errors!.length - 1} more errors)` : ""}`
            : `HTTP ${result.status}`)),
    );
    this.result = result;
  }
  /** The extensions.code of the first error that has one. */
  get code(): string | undefined {
    for (const e of this.result.errors ?? []) {
      const c = e.extensions?.["code"];
      if (typeof c === "string") return c;
    }
    return undefined;
  }
}

/** The framework-free client; see {@link createFetch}. */
export interface MutationFetch {
  <TData = unknown>(request: MutationRequest): Promise<MutationResult<TData>>;
  /**
   * Sends an unfinished intent's recorded request again, with its key: after
   * a reload, the server runs it if no earlier attempt did, or replays the
   * earlier attempt's result. It sends the request as it was first sent
   * (document and variables), not the app's current one: a deploy that
   * changed the mutation's fields in between would otherwise be refused.
   * (A send with a sent intent and another request resumes it too.)
   */
  resume<TData = unknown>(intent: Intent, options?: Pick<MutationRequest, "headers" | "signal">): Promise<MutationResult<TData>>;
}

/**
 * Returns a fetch function for GraphQL: a mutation is sent with its
 * intent's key, recorded in the intent's storage before the first attempt,
 * and retried with the same key and body (and `Idempotency-Retry`) after
 * network failures, HTTP 429/502/503/504 and the retryable codes, waiting
 * as the server asks (`Retry-After`, `retryAfterSeconds`) or with jittered
 * backoff; a final answer settles the intent, and errors reject with
 * {@link ResponseError}. Queries, and mutations without the key variable,
 * are sent once, untouched.
 *
 * ```js
 * const send = createFetch({ url: "/query", headers: { "X-Tenant-ID": "acme" } });
 * const intent = await intents.create({ name: "pay" }); // when the form renders
 * const res = await send({ query: PAY, variables: { order: "42", amount: 1200 }, intent });
 * res.data.createPayment; res.replayed;
 * ```
 */
export function createFetch(options: FetchOptions): MutationFetch {
  const warned = new Set<string>();
  const send = async <TData>(req: MutationRequest): Promise<MutationResult<TData>> => {
    const fetchImpl = options.fetch ?? globalThis.fetch;
    const configured = typeof options.headers === "function" ? await options.headers() : options.headers;
    const headers = new Headers(configured);
    new Headers(req.headers).forEach((v, k) => headers.set(k, v));
    // Resolved now, so that a URL fetch cannot use fails the send at once
    // instead of being retried as a network failure; relative to the page.
    const url = new URL(String(options.url), globalThis.location?.href).href;
    return sendGraphQL<TData>(options, warned, {
      url,
      fetch: fetchImpl,
      headers,
      request: req,
      mutation: operationType(req.query, req.operationName) === "mutation",
    });
  };
  const fn = send as MutationFetch;
  fn.resume = (intent, extra = {}) => {
    if (!intent.request) {
      return Promise.reject(new TypeError(`idem: intent ${intent.key} was never sent: there is nothing to resume`));
    }
    return send({ ...intent.request, ...extra, intent });
  };
  return fn;
}

/** Whether warnings for development are on; see {@link DevOptions.dev}. */
export function devMode(opts: DevOptions): boolean {
  if (opts.dev !== undefined) return opts.dev;
  try {
    // Written out so that bundlers replace it.
    return process.env.NODE_ENV !== "production";
  } catch {
    return true; // no process: a browser without a bundler
  }
}
declare const process: { env: Record<string, string | undefined> };

/**
 * The key of a mutation sent without an intent: new, for this call only,
 * with a warning in development (once per operation).
 */
export function keyForCall(opts: DevOptions, warned: Set<string>, operation: string | undefined): string {
  const key = newKey();
  const name = operation ?? "(anonymous)";
  if (devMode(opts) && !warned.has(name)) {
    warned.add(name);
    (opts.warn ?? console.warn)(
      `idem: mutation ${name} was sent without an intent, so it got a key for this call only (${key}); ` +
        `its retries reuse it, but a second call (a double click, a reload) is a new key and may run it again. ` +
        `Create an intent when the action starts (intents.create()) and pass it with every send.`,
    );
  }
  return key;
}

/** One send, as the fetch function and the urql exchange make it. */
interface Send {
  url: string;
  fetch: typeof globalThis.fetch;
  /** Every header but the protocol's. */
  headers: Headers;
  request: MutationRequest;
  mutation: boolean;
}

/** Sends one GraphQL request with the configured key placement and retries. */
export async function sendGraphQL<TData>(
  opts: RetryOptions & KeyOptions & DevOptions,
  warned: Set<string>,
  s: Send,
): Promise<MutationResult<TData>> {
  const { request: req } = s;
  const keyVariable = opts.keyVariable ?? Defaults.keyVariable;
  const idempotent = s.mutation && (opts.keyIn === "header" || declaresVariable(req.query, keyVariable));
  if (!idempotent) {
    if (req.intent) {
      throw new TypeError(
        s.mutation
          ? `idem: the mutation does not declare $${keyVariable}, so intent ${req.intent.key} has nowhere to put its key (or set keyIn: "header")`
          : `idem: an intent is for a mutation; this document sends a ${operationType(req.query, req.operationName)}`,
      );
    }
    // Sent once, as it is: nothing says a retry would be harmless.
    const body = JSON.stringify({ query: req.query, operationName: req.operationName, variables: req.variables });
    const answer = await attemptOf(s, body, s.headers)(1, req.signal ?? new AbortController().signal);
    return finish<TData>({ ...answer, attempts: 1 }, undefined, undefined, false);
  }

  const intent = req.intent;
  if (intent?.request && !sameRequestAs(intent, req, opts)) {
    // A sent intent is one request: what the server may have carried out.
    // Another request under its key would be refused (IDEMPOTENCY_KEY_REUSED),
    // and one under a new key might run the action twice; resume it.
    return sendGraphQL<TData>(opts, warned, { ...s, request: { ...req, ...intent.request, variables: withKey(intent.request.variables, opts, req) } });
  }
  const key = intent?.key ?? keyForCall(opts, warned, req.operationName);
  const headers = new Headers(s.headers);
  let variables = req.variables;
  if (opts.keyIn === "header") {
    headers.set(Header.Key, keyHeaderValue(key));
  } else {
    if (variables && keyVariable in variables && variables[keyVariable] !== key) {
      throw new TypeError(`idem: variable $${keyVariable} is ${String(variables[keyVariable])} but the key is ${key}: set the key in one place (the intent)`);
    }
    variables = { ...variables, [keyVariable]: key };
  }
  const recorded: IntentRequest = { query: req.query };
  if (req.variables) {
    const { [keyVariable]: _, ...rest } = req.variables;
    recorded.variables = opts.keyIn === "header" ? req.variables : rest;
  }
  if (req.operationName) recorded.operationName = req.operationName;
  const body = JSON.stringify({ query: req.query, operationName: req.operationName, variables });
  // Stored before the first attempt leaves: a reload from now on finds it.
  const ours = intent ? await intent.record(recorded) : false;
  const run = () => settle(key, attemptOf(s, body, headers), { ...opts, signal: req.signal });
  const settled = intent ? await singleFlight(intent, body, run) : await run();
  return finish<TData>(settled, key, intent, ours);
}

/** Whether req, its key aside, is the request intent recorded when it was sent. */
function sameRequestAs(intent: Intent, req: MutationRequest, opts: KeyOptions): boolean {
  const keyVariable = opts.keyVariable ?? Defaults.keyVariable;
  const r: IntentRequest = { query: req.query };
  if (req.variables) {
    const { [keyVariable]: _, ...rest } = req.variables;
    r.variables = opts.keyIn === "header" ? req.variables : rest;
  }
  if (req.operationName) r.operationName = req.operationName;
  return canonical(r) === canonical(intent.request);
}

/** The recorded variables, with the key variable of req if it set one. */
function withKey(variables: Record<string, unknown> | undefined, opts: KeyOptions, req: MutationRequest): Record<string, unknown> | undefined {
  const keyVariable = opts.keyVariable ?? Defaults.keyVariable;
  if (opts.keyIn === "header" || !req.variables || !(keyVariable in req.variables)) return variables;
  return { ...variables, [keyVariable]: req.variables[keyVariable] };
}

function attemptOf(s: Send, body: string, headers: Headers) {
  return async (n: number, signal: AbortSignal) => {
    const h = new Headers(headers);
    h.set("Content-Type", "application/json");
    if (!h.has("Accept")) h.set("Accept", "application/graphql-response+json, application/json");
    if (n > 1) h.set(Header.Retry, String(n - 1));
    const f = s.fetch; // called unbound: a browser's fetch refuses another `this`
    const res = await f(s.url, { method: "POST", headers: h, body, signal });
    const text = await res.text();
    return { reply: { status: res.status, headers: res.headers, body: parseBody(text) }, native: res.headers };
  };
}


async function finish<TData>(
  settled: Settled<Headers>,
  key: string | undefined,
  intent: Intent | undefined,
  ours: boolean,
): Promise<MutationResult<TData>> {
  const { reply, native: headers, attempts } = settled;
  const body = reply.body;
  const result: MutationResult<TData> = {
    idempotency: idempotencyReports(body?.extensions),
    replayed: isReplayed(body?.extensions, headers),
    attempts,
    status: reply.status,
    headers,
  };
  if (body && "data" in body) result.data = body.data as TData | null;
  if (body?.errors) result.errors = body.errors;
  if (body?.extensions) result.extensions = body.extensions;
  if (key !== undefined) result.key = key;
  // A GraphQL answer that no retry changes settles the intent. Any other
  // answer (a proxy's error page) says nothing of it: it stays, to resume.
  if (body && intent && ours) await intent.forget();
  if (!body) throw new ResponseError(result, `HTTP ${reply.status}: the body is not a GraphQL response`);
  if (body.errors?.length || reply.status < 200 || reply.status > 299) throw new ResponseError(result);
  return result;
}
