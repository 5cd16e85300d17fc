-- The database's ceiling for createPayment (lease mode): the rows the
-- framework, the example's resolver and the provider write for one new
-- key (the claim's INSERT, the order's paid flag, the provider's charge,
-- the payment's charge id, the completion) in one transaction, and nothing
-- else: no reads, no separate commit of the claim or of the charge, and
-- one round trip for the transaction (pgbench's pipeline mode). The
-- orders to pay (tenant pgbench, ids minorder..maxorder) are created by
-- bench/run.
-- Literals with colons are hex-encoded: pgbench would read ":name" in
-- them as its variables.
\set k random(1, 9000000000000000000)
\set oid random(:minorder, :maxorder)
\startpipeline
BEGIN;
INSERT INTO payments (tenant_id, idempotency_key, idempotency_status, idempotency_fingerprint, idempotency_attempt,
    idempotency_lease_expires_at, idempotency_claimed_at, amount, refunded_amount, order_payments)
  VALUES ('pgbench', :k::text, 'pending', convert_from(decode('76313a4d75746174696f6e2e6372656174655061796d656e743a38653432396365666562353066313836326463353836306536356637643331373a3937386530393633303930616638383861373639356131633163623166663236', 'hex'), 'UTF8'), 1,
    now() + interval '30 seconds', now(), 1200, 0, :oid)
  ON CONFLICT (tenant_id, idempotency_key) DO NOTHING RETURNING id;
UPDATE orders SET paid = true WHERE id = :oid AND tenant_id = 'pgbench' AND NOT paid;
INSERT INTO provider_charges (id, tenant, idempotency_key, order_id, amount, currency, requests, created_at)
  VALUES ('ch_' || :k::text, 'pgbench', :k::text, :oid, 1200, 'EUR', 1, now())
  ON CONFLICT (tenant, idempotency_key) DO UPDATE SET requests = provider_charges.requests + 1
  RETURNING id, order_id, amount, currency, idempotency_key, requests, created_at;
UPDATE payments SET provider_charge_id = 'ch_' || :k::text WHERE tenant_id = 'pgbench' AND idempotency_key = :k::text;
UPDATE payments SET idempotency_status = 'succeeded',
    idempotency_response = decode('7b2276223a312c2264617461223a7b226964223a22313233343536222c22616d6f756e74223a313230302c2270726f76696465724368617267654944223a2263685f333131663931666632386533633761383139313266353362222c226f72646572223a7b226964223a22313233343536222c2270616964223a747275657d7d7d', 'hex'),
    idempotency_completed_at = now()
  WHERE tenant_id = 'pgbench' AND idempotency_key = :k::text AND idempotency_status = 'pending' AND idempotency_attempt = 1;
COMMIT;
\endpipeline
