-- The tables of the example's simulated payment provider (internal/example/provider) and mailer
-- (internal/example/mailer). They are not ent's: they stand in for services that, in a real deployment,
-- keep their records in their own systems. The example keeps them beside its own tables so that tests and
-- the load tool count charges and receipts; the server's -migrate creates the same (provider.Migrate,
-- mailer.Migrate), and -migrate=false refuses to start without them. IF NOT EXISTS: servers before this
-- migration created them at start. "migrate check" leaves them out of its comparison with the ent schema.
CREATE TABLE IF NOT EXISTS provider_charges (
  id TEXT PRIMARY KEY,
  tenant TEXT NOT NULL,
  idempotency_key TEXT NOT NULL,
  order_id BIGINT NOT NULL,
  amount BIGINT NOT NULL,
  currency TEXT NOT NULL,
  requests INTEGER NOT NULL DEFAULT 1,
  voided BOOLEAN NOT NULL DEFAULT false,
  created_at TIMESTAMPTZ NOT NULL,
  requested_by TEXT NOT NULL DEFAULT '',
  UNIQUE (tenant, idempotency_key)
);
ALTER TABLE provider_charges ADD COLUMN IF NOT EXISTS requested_by TEXT NOT NULL DEFAULT '';
CREATE TABLE IF NOT EXISTS mailer_receipts (
  id TEXT PRIMARY KEY,
  tenant TEXT NOT NULL,
  downstream_key TEXT NOT NULL UNIQUE,
  order_id BIGINT NOT NULL,
  payment_id BIGINT NOT NULL,
  requests INTEGER NOT NULL DEFAULT 1,
  sent_at TIMESTAMPTZ NOT NULL
);
