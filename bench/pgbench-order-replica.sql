-- createOrder (atomic mode) statement for statement, as the framework sends
-- it (see the statement counts in BENCHMARKS.md): the lookup, then one
-- transaction with the claim, a savepoint and the completion. Six round
-- trips; the difference to pgbench-order.sql is the protocol's cost in the
-- database, the difference to the load tool's figure is HTTP, GraphQL and
-- Go.
-- Literals with colons are hex-encoded: pgbench would read ":name" in
-- them as its variables.
\set k random(1, 9000000000000000000)
SELECT now(), r.idempotency_status, r.idempotency_fingerprint, r.idempotency_response, r.idempotency_attempt,
    r.idempotency_lease_expires_at, r.idempotency_claimed_at, r.idempotency_completed_at
  FROM (SELECT 1) AS one LEFT JOIN orders AS r ON r.tenant_id = 'pgbench' AND r.idempotency_key = :k::text;
BEGIN;
INSERT INTO orders (tenant_id, idempotency_key, idempotency_status, idempotency_fingerprint, idempotency_attempt,
    idempotency_lease_expires_at, idempotency_claimed_at, amount, currency, paid)
  VALUES ('pgbench', :k::text, 'pending', convert_from(decode('76313a4d75746174696f6e2e6372656174654f726465723a34663733353332663737313861363761313962653262333339376439363961323a3833383138313433643035396266323531613164623665623237306539386338', 'hex'), 'UTF8'), 1,
    now() + interval '30 seconds', now(), 1200, 'EUR', false)
  ON CONFLICT (tenant_id, idempotency_key) DO NOTHING RETURNING id;
SAVEPOINT idem_resolver;
UPDATE orders SET idempotency_status = 'succeeded',
    idempotency_response = decode('7b2276223a312c2264617461223a7b226964223a22313233343536222c22616d6f756e74223a313230302c2263757272656e6379223a22455552222c2270616964223a66616c73657d7d', 'hex'),
    idempotency_completed_at = now()
  WHERE tenant_id = 'pgbench' AND idempotency_key = :k::text AND idempotency_status = 'pending' AND idempotency_attempt = 1;
COMMIT;
