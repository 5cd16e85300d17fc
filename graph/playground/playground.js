// The playground's one script: posts the form to /query and shows the
// answer with the idempotency headers. No dependency, no network beyond
// this server.
const $ = (id) => document.getElementById(id);

$("form").addEventListener("submit", async (event) => {
  event.preventDefault();
  let variables = {};
  const text = $("variables").value.trim();
  if (text !== "") {
    try {
      variables = JSON.parse(text);
    } catch (err) {
      $("status").textContent = "The variables are not JSON: " + err.message;
      return;
    }
  }
  const headers = { "Content-Type": "application/json" };
  for (const [field, header] of [["tenant", "X-Tenant-ID"], ["user", "X-User-ID"], ["key", "Idempotency-Key"]]) {
    const value = $(field).value.trim();
    if (value !== "") headers[header] = value;
  }
  $("status").textContent = "Sending…";
  try {
    const res = await fetch("/query", {
      method: "POST",
      headers,
      body: JSON.stringify({ query: $("query").value, variables }),
    });
    const body = await res.text();
    const replayed = res.headers.get("Idempotent-Replayed");
    $("status").textContent = "HTTP " + res.status + (replayed ? ", Idempotent-Replayed: " + replayed : "");
    try {
      $("answer").textContent = JSON.stringify(JSON.parse(body), null, 2);
    } catch {
      $("answer").textContent = body;
    }
  } catch (err) {
    $("status").textContent = "No answer: " + err.message;
  }
});
