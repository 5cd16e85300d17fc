// The three transports behind one face, so that test/scenarios.mjs runs
// the same cases on each: the fetch function, Apollo Client with the link,
// urql with the exchange. Each client sends as a tenant (X-Tenant-ID) and
// answers { ok, data, replayed } or { ok: false, code, error }.

import { ApolloClient, ApolloLink, CombinedGraphQLErrors, gql, HttpLink, InMemoryCache, ServerError } from "@apollo/client";
import { Client, fetchExchange } from "@urql/core";

import { IdempotencyLink } from "../dist/apollo.js";
import { createFetch, isReplayed, ResponseError } from "../dist/index.js";
import { idempotencyExchange } from "../dist/urql.js";

/**
 * opts: { url, tenant, headers, keyIn, maxAttempts, baseBackoff,
 * maxBackoff, onRetry, warn, dev }.
 */
export const fetchAdapter = {
  name: "fetch",
  make(opts) {
    const send = createFetch({ ...opts, headers: { "X-Tenant-ID": opts.tenant, ...opts.headers } });
    const wrap = async (p) => {
      try {
        const r = await p;
        return { ok: true, data: r.data, replayed: r.replayed, attempts: r.attempts };
      } catch (e) {
        return { ok: false, code: e instanceof ResponseError ? e.code : undefined, error: e };
      }
    };
    return {
      mutate: ({ query, variables, intent }) => wrap(send({ query, variables, intent })),
      query: ({ query, variables }) => wrap(send({ query, variables })),
      resume: (intent) => wrap(send.resume(intent)),
    };
  },
};

const parsed = new Map();
const doc = (s) => {
  if (!parsed.has(s)) parsed.set(s, gql(s));
  return parsed.get(s);
};

function apolloFailure(e) {
  if (CombinedGraphQLErrors.is(e)) return { ok: false, code: e.errors[0]?.extensions?.code, error: e };
  if (ServerError.is(e)) {
    let code;
    try {
      code = JSON.parse(e.bodyText).errors?.[0]?.extensions?.code;
    } catch {}
    return { ok: false, code, error: e };
  }
  return { ok: false, error: e };
}

export const apolloAdapter = {
  name: "apollo",
  make(opts) {
    const { url, tenant, headers, ...linkOpts } = opts;
    const client = new ApolloClient({
      cache: new InMemoryCache(),
      link: ApolloLink.from([new IdempotencyLink(linkOpts), new HttpLink({ uri: url, headers: { "X-Tenant-ID": tenant, ...headers } })]),
    });
    const mutate = async ({ query, variables, intent }) => {
      try {
        const r = await client.mutate({ mutation: doc(query), variables, context: intent ? { intent } : {}, fetchPolicy: "no-cache" });
        return { ok: true, data: r.data, replayed: isReplayed(r.extensions) };
      } catch (e) {
        return apolloFailure(e);
      }
    };
    return {
      mutate,
      query: async ({ query, variables }) => {
        try {
          const r = await client.query({ query: doc(query), variables, fetchPolicy: "no-cache" });
          return { ok: true, data: r.data };
        } catch (e) {
          return apolloFailure(e);
        }
      },
      // An app resumes with its own document and the recorded variables.
      resume: (intent, query) => mutate({ query, variables: intent.request.variables, intent }),
    };
  },
};

function urqlResult(r) {
  if (r.error?.graphQLErrors?.length) return { ok: false, code: r.error.graphQLErrors[0].extensions?.code, error: r.error };
  if (r.error) return { ok: false, error: r.error.networkError ?? r.error };
  return { ok: true, data: r.data, replayed: isReplayed(r.extensions) };
}

export const urqlAdapter = {
  name: "urql",
  make(opts) {
    const { url, tenant, headers, ...exchangeOpts } = opts;
    const client = new Client({
      url,
      exchanges: [idempotencyExchange(exchangeOpts), fetchExchange],
      fetchOptions: { headers: { "X-Tenant-ID": tenant, ...headers } },
      requestPolicy: "network-only",
      preferGetMethod: false, // the example server takes POST only
    });
    const mutate = async ({ query, variables, intent }) =>
      urqlResult(await client.mutation(query, variables, intent ? { intent } : {}).toPromise());
    return {
      mutate,
      query: async ({ query, variables }) => urqlResult(await client.query(query, variables).toPromise()),
      resume: (intent, query) => mutate({ query, variables: intent.request.variables, intent }),
    };
  },
};
