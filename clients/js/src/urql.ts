// The urql 6 exchange: mutations carry their intent's key and are sent,
// and retried with it, by the fetch function's code; every other operation
// goes on to the next exchange untouched.

import { subscriptionExchange, type Exchange, type Operation } from "@urql/core";

import { ResponseError, sendGraphQL, type DevOptions, type KeyOptions } from "./fetch.js";
import { Defaults, type RetryOptions } from "./retry.js";

/** The exchange's configuration. */
export interface IdempotencyExchangeOptions extends RetryOptions, KeyOptions, DevOptions {
  /**
   * Whether a mutation is idempotent: sent by this exchange, with a key,
   * and retried. Default: with keyIn "variable", the mutations that declare
   * the key variable; with keyIn "header", every mutation. The others go on
   * to the next exchange.
   */
  isIdempotent?: (operation: Operation) => boolean;
}

/**
 * An exchange, placed before fetchExchange, that sends urql's idempotent
 * mutations itself: with the intent of the operation's context (or, without
 * one, a key for this call only and a warning in development), recorded in
 * the intent's storage before the first attempt, retried with the same key
 * and body after network failures, HTTP 429/502/503/504 and the retryable
 * codes, waiting as the server asks. It reads the client's url,
 * fetchOptions (headers) and fetch from the operation's context, as
 * fetchExchange does.
 *
 * ```js
 * const client = new Client({
 *   url: "/query",
 *   exchanges: [cacheExchange, idempotencyExchange(), fetchExchange],
 * });
 * const intent = await intents.create({ name: "pay" });
 * const result = await client.mutation(PAY, variables, { intent }).toPromise();
 * isReplayed(result.extensions);
 * ```
 */
export function idempotencyExchange(options: IdempotencyExchangeOptions = {}): Exchange {
  const warned = new Set<string>();
  const keyVariable = options.keyVariable ?? Defaults.keyVariable;
  const handles = (op: Operation): boolean => {
    if (op.kind !== "mutation") return false;
    if (options.isIdempotent) return options.isIdempotent(op);
    if (op.context["intent"]) return true; // and refused below, if it has nowhere to put its key
    return (
      options.keyIn === "header" ||
      op.query.definitions.some(
        (d) => d.kind === "OperationDefinition" && d.variableDefinitions?.some((v) => v.variable.name.value === keyVariable),
      )
    );
  };
  return subscriptionExchange({
    isSubscriptionOperation: handles,
    forwardSubscription: (request, operation) => ({
      subscribe(sink) {
        const abort = new AbortController();
        const ctx = operation.context;
        const fetchOptions = (typeof ctx.fetchOptions === "function" ? ctx.fetchOptions() : ctx.fetchOptions) ?? {};
        const send = sendGraphQL(options, warned, {
          url: ctx.url,
          fetch: ctx.fetch ?? globalThis.fetch,
          headers: new Headers(fetchOptions.headers),
          mutation: true,
          request: {
            query: request.query ?? "",
            variables: request.variables as Record<string, unknown> | undefined,
            operationName: request.operationName,
            intent: ctx["intent"],
            signal: abort.signal,
          },
        });
        send.then(
          (r) => {
            sink.next({ data: r.data as Record<string, unknown> | null | undefined, extensions: r.extensions });
            sink.complete();
          },
          (e: unknown) => {
            // A final GraphQL answer with errors is a result (urql's
            // graphQLErrors); anything else is a network error.
            const r = e instanceof ResponseError && e.result.errors ? e.result : undefined;
            if (r) {
              sink.next({ data: r.data as Record<string, unknown> | null | undefined, errors: r.errors as never, extensions: r.extensions });
              sink.complete();
            } else {
              sink.error(e);
            }
          },
        );
        return { unsubscribe: () => abort.abort() };
      },
    }),
  });
}
