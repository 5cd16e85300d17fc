// A fresh Vite + React + Apollo Client app that installed the packed
// @goovo/idem-client as docs/clients.md says, and pays an order on a
// GraphQL server of another origin (its URL, tenant and order in the
// page's query string).
import { ApolloClient, ApolloLink, gql, HttpLink, InMemoryCache } from "@apollo/client";
import { Intents } from "@goovo/idem-client";
import { IdempotencyLink } from "@goovo/idem-client/apollo";
import { useIntent } from "@goovo/idem-client/react";
import { StrictMode, useState } from "react";
import { createRoot } from "react-dom/client";

const params = new URLSearchParams(location.search);
const order = params.get("order");

const intents = new Intents(); // IndexedDB in the browser; safe to make at module level
const client = new ApolloClient({
  cache: new InMemoryCache(),
  link: ApolloLink.from([
    new IdempotencyLink(),
    new HttpLink({ uri: `${params.get("server")}/query`, headers: { "X-Tenant-ID": params.get("tenant") } }),
  ]),
});
const PAY = gql`
  mutation Pay($key: String, $input: CreatePaymentInput!) {
    createPayment(idempotencyKey: $key, input: $input) { id providerChargeID }
  }
`;

function PayButton() {
  const { intent } = useIntent(intents, { name: "pay", meta: { order } });
  const [status, setStatus] = useState("");
  const pay = async () => {
    setStatus("paying");
    try {
      const { data } = await client.mutate({
        mutation: PAY,
        variables: { input: { orderID: order, amount: Number(params.get("amount")) } },
        context: { intent },
      });
      setStatus(`paid: payment ${data.createPayment.id}, key ${intent.key}`);
    } catch (e) {
      setStatus(`error: ${e.message}`);
    }
  };
  return (
    <p>
      <button id="pay" disabled={!intent} onClick={pay}>Pay</button> <span id="status">{status}</span>
    </p>
  );
}

createRoot(document.getElementById("root")).render(
  <StrictMode>
    <PayButton />
  </StrictMode>,
);
