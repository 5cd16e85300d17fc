// A React app of the kind the package's users write, for react.test.mjs:
// two payment buttons for the same order rendered at once under
// StrictMode (which mounts each twice), each with useIntent; intents in
// the default storage (IndexedDB); the GraphQL server on another origin
// (CORS). Bundled by esbuild in development mode, as a dev server would.
import { StrictMode, useState } from "react";
import { createRoot } from "react-dom/client";

import { createFetch, Intents } from "../../dist/index.js";
import { useIntent } from "../../dist/react.js";

const params = new URLSearchParams(location.search);
const server = params.get("server");
const tenant = params.get("tenant");
const order = params.get("order");
const amount = Number(params.get("amount"));

const intents = new Intents();
window.intents = intents;
const send = createFetch({ url: `${server}/query`, headers: { "X-Tenant-ID": tenant }, maxBackoff: 500 });
const PAY = `mutation Pay($key: String, $input: CreatePaymentInput!) {
  createPayment(idempotencyKey: $key, input: $input) { id providerChargeID }
}`;

function PayButton({ id }) {
  const { intent } = useIntent(intents, { name: "pay", meta: { order } });
  const [status, setStatus] = useState("");
  const pay = async () => {
    setStatus("paying");
    try {
      const res = intent.sent
        ? await send.resume(intent)
        : await send({ query: PAY, variables: { input: { orderID: order, amount } }, intent });
      setStatus(`paid: payment ${res.data.createPayment.id}, key ${res.key}, echoed ${res.headers.get("Idempotency-Key")}`);
    } catch (e) {
      setStatus(`error: ${e.message}`);
    }
  };
  return (
    <p id={id} data-key={intent?.key ?? ""} data-sent={String(!!intent?.sent)}>
      <button disabled={!intent} onClick={pay}>
        {intent?.sent ? "Finish the payment" : "Pay"}
      </button>{" "}
      <span className="status">{status}</span>
    </p>
  );
}

createRoot(document.getElementById("root")).render(
  <StrictMode>
    <PayButton id="a" />
    <PayButton id="b" />
  </StrictMode>,
);
