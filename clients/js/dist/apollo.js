// The Apollo Client 4 link: mutations carry their intent's key and are
// retried with it; queries pass through untouched.
import { ApolloLink, gql, Observable } from "@apollo/client";
import { ServerError, ServerParseError } from "@apollo/client/errors";
import { print } from "@apollo/client/utilities";
import { keyForCall } from "./fetch.js";
import { singleFlight } from "./intents.js";
import { Header, keyHeaderValue } from "./key.js";
import { Defaults, parseBody, settle } from "./retry.js";
/**
 * A non-terminating link, placed before the HttpLink, that makes Apollo
 * Client's mutations retry-safe. Pass the intent in the mutation's context;
 * without one a mutation gets a key for this call only, with a warning in
 * development.
 *
 * ```js
 * const client = new ApolloClient({
 *   cache: new InMemoryCache(),
 *   link: ApolloLink.from([new IdempotencyLink(), new HttpLink({ uri: "/query" })]),
 * });
 * const intent = await intents.create({ name: "pay" });
 * const { data, extensions } = await client.mutate({ mutation: PAY, variables, context: { intent } });
 * isReplayed(extensions);
 * ```
 *
 * Every attempt goes down the rest of the chain (forward) with the same key
 * and variables, and `Idempotency-Retry` on retries. Network failures, HTTP
 * 429/502/503/504 (Apollo's ServerError) and the retryable codes are
 * retried, as the server asks (`Retry-After`, `retryAfterSeconds`) or with
 * jittered backoff; the final answer reaches Apollo as the HttpLink gave it.
 */
export class IdempotencyLink extends ApolloLink {
    #options;
    #warned = new Set();
    constructor(options = {}) {
        super();
        this.#options = options;
    }
    request(operation, forward) {
        if (operation.operationType !== "mutation")
            return forward(operation);
        const opts = this.#options;
        const keyVariable = opts.keyVariable ?? Defaults.keyVariable;
        const intent = operation.getContext().intent;
        const idempotent = opts.isIdempotent
            ? opts.isIdempotent(operation)
            : opts.keyIn === "header" ||
                operation.query.definitions.some((d) => d.kind === "OperationDefinition" && d.variableDefinitions?.some((v) => v.variable.name.value === keyVariable));
        if (!idempotent) {
            if (intent) {
                return new Observable((o) => o.error(new TypeError(`idem: mutation ${operation.operationName ?? ""} does not declare $${keyVariable}, so intent ${intent.key} has nowhere to put its key`)));
            }
            return forward(operation);
        }
        return new Observable((observer) => {
            const abort = new AbortController();
            (async () => {
                if (intent?.request) {
                    // A sent intent is one request, what the server may have carried
                    // out: it is sent again as recorded (a resume), whatever document
                    // the app holds now, which the server would refuse under this key.
                    operation.query = gql(intent.request.query);
                    const v = operation.variables[keyVariable];
                    operation.variables = { ...intent.request.variables };
                    if (v !== undefined && opts.keyIn !== "header")
                        operation.variables[keyVariable] = v;
                }
                const key = intent?.key ?? keyForCall(opts, this.#warned, operation.operationName);
                const recorded = { query: print(operation.query) };
                if (Object.keys(operation.variables).length > 0)
                    recorded.variables = { ...operation.variables };
                if (operation.operationName)
                    recorded.operationName = operation.operationName;
                if (opts.keyIn === "header") {
                    operation.setContext((ctx) => ({ headers: { ...ctx["headers"], [Header.Key]: keyHeaderValue(key) } }));
                }
                else {
                    const v = operation.variables[keyVariable];
                    if (v !== undefined && v !== key) {
                        throw new TypeError(`idem: variable $${keyVariable} is ${String(v)} but the key is ${key}: set the key in one place (the intent)`);
                    }
                    delete recorded.variables?.[keyVariable];
                    operation.variables = { ...operation.variables, [keyVariable]: key };
                }
                const ours = intent ? await intent.record(recorded) : false;
                const run = () => settle(key, (n, signal) => attempt(operation, forward, n, signal), { ...opts, signal: abort.signal });
                const body = JSON.stringify([recorded, opts.keyIn ?? "variable"]);
                const settled = intent ? await singleFlight(intent, body, run) : await run();
                if (settled.reply.body && intent && ours)
                    await intent.forget();
                if ("result" in settled.native) {
                    observer.next(settled.native.result);
                    observer.complete();
                }
                else {
                    observer.error(settled.native.error);
                }
            })().catch((e) => observer.error(e));
            return () => abort.abort();
        });
    }
}
/** One attempt down the chain: the HttpLink's result or error, read as a reply. */
function attempt(operation, forward, n, signal) {
    if (n > 1)
        operation.setContext((ctx) => ({ headers: { ...ctx["headers"], [Header.Retry]: String(n - 1) } }));
    return new Promise((resolve, reject) => {
        let result;
        const sub = forward(operation).subscribe({
            next: (r) => void (result = r),
            error: (e) => {
                signal.removeEventListener("abort", stop);
                if (ServerError.is(e)) {
                    resolve({ reply: { status: e.statusCode, headers: e.response.headers, body: parseBody(e.bodyText) }, native: { error: e } });
                }
                else if (ServerParseError.is(e)) {
                    resolve({ reply: { status: e.statusCode, headers: e.response.headers }, native: { error: e } });
                }
                else {
                    reject(e); // in transit: a network failure
                }
            },
            complete: () => {
                signal.removeEventListener("abort", stop);
                const response = operation.getContext()["response"];
                if (!result)
                    return reject(new Error("idem: the link chain completed without a result"));
                resolve({
                    reply: { status: response?.status ?? 200, headers: response?.headers, body: result },
                    native: { result },
                });
            },
        });
        const stop = () => {
            sub.unsubscribe();
            reject(signal.reason);
        };
        if (signal.aborted)
            stop();
        else
            signal.addEventListener("abort", stop, { once: true });
    });
}
/**
 * Sends an unfinished intent's recorded request again through client (whose
 * link chain has an {@link IdempotencyLink}), with its key: the document and
 * variables as they were first sent, not the app's current mutation, which a
 * deploy may have changed since. After a reload the server runs the
 * request if no earlier attempt did, or replays that attempt's result.
 *
 * ```js
 * for (const intent of await intents.list({ name: "pay" })) {
 *   if (intent.sent) await resumeMutation(client, intent);
 * }
 * ```
 */
export function resumeMutation(client, intent, options = {}) {
    const request = intent.request;
    if (!request)
        return Promise.reject(new TypeError(`idem: intent ${intent.key} was never sent: there is nothing to resume`));
    return client.mutate({
        ...options,
        mutation: gql(request.query),
        variables: request.variables ?? {},
        context: { ...options.context, intent },
    });
}
