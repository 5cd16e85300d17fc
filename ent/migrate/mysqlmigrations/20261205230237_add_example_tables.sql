-- The example's tables on MySQL that are not ent's (graph.MySQLTables; the server's -migrate creates the same):
-- the simulated payment provider's and mailer's (internal/example/provider, internal/example/mailer), which
-- stand in for services that, in a real deployment, keep their records in their own systems, and the receipt
-- outbox (graph.ReceiptTable), the example's own outbox where River does not run: a row per receipt, inserted in
-- the payment's transaction and delivered by the server's workers. "migrate check" leaves them out of its
-- comparison with the ent schema. Keyed columns are VARCHARs (MySQL indexes no TEXT without a length); every
-- table is utf8mb4 compared byte for byte, whatever the database's default.
CREATE TABLE IF NOT EXISTS provider_charges (
  id VARCHAR(64) PRIMARY KEY,
  tenant VARCHAR(255) NOT NULL,
  idempotency_key VARCHAR(255) NOT NULL,
  order_id BIGINT NOT NULL,
  amount BIGINT NOT NULL,
  currency VARCHAR(16) NOT NULL,
  requests INTEGER NOT NULL DEFAULT 1,
  voided BOOLEAN NOT NULL DEFAULT false,
  created_at DATETIME(6) NOT NULL,
  requested_by VARCHAR(255) NOT NULL DEFAULT '',
  UNIQUE (tenant, idempotency_key)
) DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
CREATE TABLE IF NOT EXISTS mailer_receipts (
  id VARCHAR(64) PRIMARY KEY,
  tenant VARCHAR(255) NOT NULL,
  downstream_key VARCHAR(255) NOT NULL UNIQUE,
  order_id BIGINT NOT NULL,
  payment_id BIGINT NOT NULL,
  requests INTEGER NOT NULL DEFAULT 1,
  sent_at DATETIME(6) NOT NULL
) DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
CREATE TABLE IF NOT EXISTS receipt_outbox (
  id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  tenant VARCHAR(255) NOT NULL,
  order_id BIGINT NOT NULL,
  payment_id BIGINT NOT NULL,
  downstream_key VARCHAR(64) NOT NULL,
  created_at DATETIME(6) NOT NULL,
  delivered_at DATETIME(6) NULL,
  UNIQUE KEY receipt_outbox_payment_id (payment_id),
  KEY receipt_outbox_pending (delivered_at, id)
) DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
