// Compiled (not run) by `npm run check-types`: the declarations in dist/,
// reached through the package's exports as an app imports them,
// serve a TypeScript app that uses the three transports, and the intent in
// Apollo's context is typed.
import { ApolloClient, ApolloLink, HttpLink, InMemoryCache, gql } from "@apollo/client";
import { Client, fetchExchange } from "@urql/core";
import { IdempotencyLink, resumeMutation } from "@goovo/idem-client/apollo";
import { useIntent, type IntentState } from "@goovo/idem-client/react";
import { idempotencyExchange } from "@goovo/idem-client/urql";
import { Intents, createFetch, isReplayed, Code, type MutationResult } from "@goovo/idem-client";
import { fileStorage } from "@goovo/idem-client/node";
const intents = new Intents(fileStorage("intents.json"));
const intent = await intents.create({ name: "pay" });
const client = new ApolloClient({ cache: new InMemoryCache(), link: ApolloLink.from([new IdempotencyLink({ keyIn: "header" }), new HttpLink({ uri: "/q" })]) });
const r = await client.mutate({ mutation: gql`mutation { a }`, context: { intent } });
isReplayed(r.extensions);
const u = new Client({ url: "/q", exchanges: [idempotencyExchange(), fetchExchange] });
await u.mutation(`mutation { a }`, {}, { intent }).toPromise();
const send = createFetch({ url: "/q" });
const res: MutationResult<{ a: number }> = await send<{ a: number }>({ query: "mutation { a }", intent });
const c: Code = Code.KeyReused;
console.log(res.data?.a, c);
const resumed = await resumeMutation<{ a: number }>(client, intent);
console.log(resumed.data?.a);
// The hook's type, as a component calls it (not called here: no React root).
const hook: (i: Intents, init: { name: string; meta?: unknown }) => IntentState = useIntent;
console.log(hook, new Intents(undefined, { unsentFor: 60_000 }));
// @ts-expect-error an intent in Apollo's context must be an Intent
await client.mutate({ mutation: gql`mutation { a }`, context: { intent: 42 } });
