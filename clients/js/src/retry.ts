// The retry loop every transport shares: when an answer is final for the
// intent, when it is worth another attempt with the same key, and how long
// to wait. It mirrors Go's idemclient.Client.Do.

import { allCodes, Code, retryableCodes } from "./codes.js";
import { Header } from "./key.js";
import { Outcome } from "./wire.js";

/** Defaults of {@link RetryOptions}. */
export const Defaults = {
  /** Attempts of one send, the first included: the first and seven retries. */
  maxAttempts: 8,
  /** Backoff ceiling of the first retry, in milliseconds. */
  baseBackoff: 100,
  /** Bound of every wait between two attempts, in milliseconds. */
  maxBackoff: 5000,
  /** The GraphQL variable that carries the key. */
  keyVariable: "key",
} as const;

/** How a transport retries; every field has a default. */
export interface RetryOptions {
  /** Attempts of one send, the first included. Default 8. */
  maxAttempts?: number;
  /**
   * The wait between attempts is "full jitter" exponential backoff: a
   * uniformly random wait between 0 and min(maxBackoff, baseBackoff·2^(retry-1))
   * milliseconds. A server's hint (IDEMPOTENCY_IN_PROGRESS's
   * `retryAfterSeconds`, a `Retry-After` header) replaces the random wait
   * when it is longer, capped at maxBackoff. Defaults 100 and 5000.
   */
  baseBackoff?: number;
  /** See {@link RetryOptions.baseBackoff}. */
  maxBackoff?: number;
  /**
   * Bounds each attempt, in milliseconds: an attempt still running is
   * abandoned and retried. Default: none (the page's or process's own
   * timeouts apply).
   */
  attemptTimeout?: number;
  /**
   * When greater than attemptTimeout, the timeout doubles with each attempt
   * up to it. An abandoned attempt is abandoned on the server too (it rolls
   * the attempt back and frees the key), so a timeout that never grows, set
   * below the time the mutation really takes, would fail every attempt.
   */
  maxAttemptTimeout?: number;
  /** Observes every retry, before its wait: for logs, metrics, a spinner. */
  onRetry?: (retry: RetryInfo) => void;
}

/** Why an attempt was retried. */
export type Reason =
  /** The request failed in transit: whether the server ran it is unknown, which the key makes harmless. */
  | "network"
  /** The attempt ran out of time (attemptTimeout) and was abandoned. */
  | "timeout"
  /** HTTP 429, 502, 503 or 504, typically from a proxy or load balancer. */
  | "http-status"
  /** IDEMPOTENCY_IN_PROGRESS: another attempt with the key holds it. */
  | "in-progress"
  /** IDEMPOTENCY_UNAVAILABLE: the server could not reach its record store and did not run the mutation. */
  | "unavailable"
  /** A field was reported "released": it failed with a retryable error, was rolled back and the key freed. */
  | "released"
  /** Another retryable code, such as INTERNAL_SERVER_ERROR. */
  | "retryable";

/** One retry, for {@link RetryOptions.onRetry}. */
export interface RetryInfo {
  /** The idempotency key, the same on every attempt. */
  key: string;
  /** The attempt being retried (1 for the first). */
  attempt: number;
  reason: Reason;
  /** HTTP status of the attempt, 0 if none was received. */
  status: number;
  /** The extensions.code behind the reason, if any. */
  code?: string;
  /** The transport's error, for "network" and "timeout". */
  error?: unknown;
  /** The wait before the next attempt, in milliseconds. */
  delay: number;
}

/** A GraphQL error as it arrives in a response. */
export interface GraphQLErrorLike {
  message: string;
  path?: ReadonlyArray<string | number>;
  extensions?: Record<string, unknown>;
}

/** A GraphQL response body. */
export interface GraphQLBody {
  data?: unknown;
  errors?: ReadonlyArray<GraphQLErrorLike>;
  extensions?: Record<string, unknown>;
}

/**
 * What the server reports of one idempotent field, in
 * `extensions.idempotency.<responseName>`.
 */
export interface FieldReport {
  /** The field's idempotency key. */
  key: string;
  /** One of {@link Outcome}: "executed", "replayed", "released", "refused" or "keyless". */
  outcome: string;
  /** outcome === "replayed": the stored result of an earlier request. */
  replayed: boolean;
  /** Until when the key's result is replayable (RFC 3339). */
  expiresAt?: string;
}

/** What one attempt got back, as a transport read it. */
export interface Reply {
  status: number;
  headers?: { get(name: string): string | null } | undefined;
  /** The body, when it is a GraphQL response; undefined otherwise. */
  body?: GraphQLBody | undefined;
}

/** An attempt's reply, and the transport's own form of it to hand on. */
export interface Answer<N> {
  reply: Reply;
  native: N;
}

/** The final answer of a send, after `attempts` attempts. */
export interface Settled<N> extends Answer<N> {
  attempts: number;
}

/**
 * The error a send ends with when its last attempt still asked for a
 * retry. The intent may or may not have been carried out: it stays
 * unfinished in its storage, to be sent again later with the same key.
 */
export class RetriesExhaustedError extends Error {
  override name = "RetriesExhaustedError";
  /** The key of the send. */
  readonly key: string;
  /** Attempts made. */
  readonly attempts: number;
  /** Why the last attempt asked for a retry. */
  readonly reason: Reason;
  /** The last reply received, if any. */
  readonly reply: Reply | undefined;
  constructor(key: string, attempts: number, reason: Reason, detail: string, reply: Reply | undefined, cause?: unknown) {
    super(
      `idem: retries exhausted after ${attempts} attempts, the last one: ${detail}; ` +
        `the intent may or may not have been carried out: send it again later with the same key`,
      cause === undefined ? undefined : { cause },
    );
    this.key = key;
    this.attempts = attempts;
    this.reason = reason;
    this.reply = reply;
  }
}

const known = new Set<string>(allCodes);
const retryable = new Set<string>(retryableCodes);

/** Whether code is one of the codes an idem server answers with ({@link allCodes}). */
export function isKnownCode(code: string): boolean {
  return known.has(code);
}

/**
 * Whether a retry of the same request, with the same key, may get another
 * answer than code: IDEMPOTENCY_IN_PROGRESS, IDEMPOTENCY_UNAVAILABLE and
 * INTERNAL_SERVER_ERROR.
 */
export function isRetryableCode(code: string): boolean {
  return retryable.has(code);
}

/** Whether code is a known code that no retry of the same request changes. */
export function isFinalCode(code: string): boolean {
  return known.has(code) && !retryable.has(code);
}

/** The idempotency reports of a response's extensions, by response name. */
export function idempotencyReports(extensions: Record<string, unknown> | undefined | null): Record<string, FieldReport> {
  const v = extensions?.["idempotency"];
  return v && typeof v === "object" ? (v as Record<string, FieldReport>) : {};
}

/**
 * Whether every idempotent field of a response was replayed from an
 * earlier request's stored result, from its extensions (`result.extensions`
 * of Apollo's mutate and of urql's results), or, given the response's
 * headers, from `Idempotent-Replayed: true`.
 */
export function isReplayed(
  extensions: Record<string, unknown> | undefined | null,
  headers?: { get(name: string): string | null },
): boolean {
  if (headers?.get(Header.Replayed)?.toLowerCase() === "true") return true;
  const reports = Object.values(idempotencyReports(extensions));
  return reports.length > 0 && reports.every((r) => r.outcome === Outcome.Replayed);
}

interface Verdict {
  /** Why to retry; undefined when the answer is final. */
  reason?: Reason;
  code?: string;
  /** The server's hint, in milliseconds; 0 if none. */
  hint: number;
}

/**
 * Reads one reply: the reason to retry it, or none when it is final. A
 * final code wins over the retryable signals of other fields: no retry
 * changes it.
 */
export function classify(reply: Reply): Verdict {
  const { status, body } = reply;
  if (status === 429 || status === 502 || status === 503 || status === 504) {
    return { reason: "http-status", hint: retryAfterHeader(reply.headers) };
  }
  if (!body) return { hint: 0 };
  let reason: Reason | undefined;
  let code: string | undefined;
  let hint = 0;
  for (const e of body.errors ?? []) {
    const c = typeof e?.extensions?.["code"] === "string" ? (e.extensions["code"] as string) : "";
    if (isFinalCode(c)) return { hint: 0 };
    if (c === Code.InProgress) {
      reason = "in-progress";
      code = c;
      const s = e.extensions?.["retryAfterSeconds"];
      if (typeof s === "number" && s >= 0) hint = Math.max(hint, s * 1000);
    } else if (c === Code.Unavailable) {
      if (reason !== "in-progress") {
        reason = "unavailable";
        code = c;
      }
    } else if (isRetryableCode(c) && code === undefined) {
      code = c;
    }
  }
  if (reason === "in-progress") hint = Math.max(hint, retryAfterHeader(reply.headers));
  if (reason) return { reason, code, hint };
  for (const r of Object.values(idempotencyReports(body.extensions))) {
    if (r?.outcome === Outcome.Released) return { reason: "released", hint };
  }
  if (code !== undefined) return { reason: "retryable", code, hint };
  return { hint };
}

/** A response body as a GraphQL response, or undefined when it is not one. */
export function parseBody(text: string): GraphQLBody | undefined {
  try {
    const v = JSON.parse(text);
    return v && typeof v === "object" && ("data" in v || "errors" in v) ? (v as GraphQLBody) : undefined;
  } catch {
    return undefined;
  }
}

/** Retry-After in milliseconds: seconds or an HTTP date; 0 if absent. */
function retryAfterHeader(headers: Reply["headers"]): number {
  const v = headers?.get("Retry-After")?.trim();
  if (!v) return 0;
  if (/^\d+$/.test(v)) return Number(v) * 1000;
  const t = Date.parse(v);
  return Number.isNaN(t) ? 0 : Math.max(0, t - Date.now());
}

/** The wait after attempt n (1-based) failed: full jitter, or the server's longer hint; both capped at maxBackoff. */
export function backoff(n: number, hint: number, opts: RetryOptions): number {
  const base = opts.baseBackoff && opts.baseBackoff > 0 ? opts.baseBackoff : Defaults.baseBackoff;
  const max = opts.maxBackoff && opts.maxBackoff > 0 ? opts.maxBackoff : Defaults.maxBackoff;
  const ceiling = Math.min(max, base * 2 ** Math.min(n - 1, 30));
  let d = Math.random() * ceiling;
  if (hint > 0) d = Math.max(d, Math.min(hint, max));
  return Math.round(d);
}

function attemptTimeout(n: number, opts: RetryOptions): number {
  let t = opts.attemptTimeout ?? 0;
  if (t <= 0) return 0;
  const max = opts.maxAttemptTimeout ?? 0;
  if (max > t) t = Math.min(max, t * 2 ** Math.min(n - 1, 30));
  return t;
}

/** The error of a send given up because its signal was aborted. */
function aborted(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException("The operation was aborted.", "AbortError");
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(aborted(signal));
    const done = () => {
      signal?.removeEventListener("abort", stop);
      resolve();
    };
    const timer = setTimeout(done, ms);
    const stop = () => {
      clearTimeout(timer);
      reject(aborted(signal!));
    };
    signal?.addEventListener("abort", stop, { once: true });
  });
}

/**
 * Runs attempt until its answer is final for the intent, maxAttempts
 * attempts were made, or signal is aborted. An attempt that throws failed
 * in transit ("network", or "timeout" when attemptTimeout ended it); one
 * that returns is classified by {@link classify}. The attempt's own signal
 * is aborted when the attempt times out or signal is aborted.
 *
 * Throws {@link RetriesExhaustedError}, or signal's reason.
 */
export async function settle<N>(
  key: string,
  attempt: (n: number, signal: AbortSignal) => Promise<Answer<N>>,
  opts: RetryOptions & { signal?: AbortSignal | undefined },
): Promise<Settled<N>> {
  const { signal } = opts;
  const max = opts.maxAttempts && opts.maxAttempts > 0 ? opts.maxAttempts : Defaults.maxAttempts;
  for (let n = 1; ; n++) {
    if (signal?.aborted) throw aborted(signal);
    const ac = new AbortController();
    const onAbort = () => ac.abort(aborted(signal!));
    signal?.addEventListener("abort", onAbort, { once: true });
    let timedOut = false;
    const limit = attemptTimeout(n, opts);
    const timer =
      limit > 0
        ? setTimeout(() => {
            timedOut = true;
            ac.abort(new DOMException(`attempt ${n} ran out of time (${limit} ms)`, "TimeoutError"));
          }, limit)
        : undefined;
    let answer: Answer<N> | undefined;
    let verdict: Verdict;
    let error: unknown;
    try {
      answer = await attempt(n, ac.signal);
      verdict = classify(answer.reply);
    } catch (e) {
      if (signal?.aborted) throw aborted(signal);
      error = e;
      verdict = { reason: timedOut ? "timeout" : "network", hint: 0 };
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
    }
    const reason = verdict.reason;
    if (!reason) return { ...answer!, attempts: n };
    const status = answer?.reply.status ?? 0;
    if (n >= max) {
      const detail = error !== undefined ? `${reason}: ${String(error)}` : verdict.code ? `${reason} (${verdict.code})` : `${reason} (HTTP ${status})`;
      throw new RetriesExhaustedError(key, n, reason, detail, answer?.reply, error);
    }
    const delay = backoff(n, verdict.hint, opts);
    opts.onRetry?.({ key, attempt: n, reason, status, code: verdict.code, error, delay });
    await sleep(delay, signal);
  }
}
