-- The database's ceiling for createOrder (atomic mode): the rows the
-- framework writes for one new key (the claim's INSERT and the
-- completion's UPDATE, with the same columns and a stored response of the
-- same size) in one transaction, and nothing else: no lookup, no
-- savepoint, no HTTP, GraphQL or Go. The transaction is one round trip
-- (pgbench's pipeline mode), as few as any client could send it in. Run by bench/run with pgbench -M
-- prepared in the schema of a load-tool bench (search_path), whose tables
-- the example server created.
-- Literals with colons are hex-encoded: pgbench would read ":name" in
-- them as its variables.
\set k random(1, 9000000000000000000)
\startpipeline
BEGIN;
INSERT INTO orders (tenant_id, idempotency_key, idempotency_status, idempotency_fingerprint, idempotency_attempt,
    idempotency_lease_expires_at, idempotency_claimed_at, amount, currency, paid)
  VALUES ('pgbench', :k::text, 'pending', convert_from(decode('76313a4d75746174696f6e2e6372656174654f726465723a34663733353332663737313861363761313962653262333339376439363961323a3833383138313433643035396266323531613164623665623237306539386338', 'hex'), 'UTF8'), 1,
    now() + interval '30 seconds', now(), 1200, 'EUR', false)
  ON CONFLICT (tenant_id, idempotency_key) DO NOTHING RETURNING id;
UPDATE orders SET idempotency_status = 'succeeded',
    idempotency_response = decode('7b2276223a312c2264617461223a7b226964223a22313233343536222c22616d6f756e74223a313230302c2263757272656e6379223a22455552222c2270616964223a66616c73657d7d', 'hex'),
    idempotency_completed_at = now()
  WHERE tenant_id = 'pgbench' AND idempotency_key = :k::text AND idempotency_status = 'pending' AND idempotency_attempt = 1;
COMMIT;
\endpipeline
