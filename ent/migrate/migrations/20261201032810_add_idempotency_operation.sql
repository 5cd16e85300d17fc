-- Modify "orders" table
ALTER TABLE "orders" ADD COLUMN "idempotency_operation" bytea NULL;
-- Modify "page_views" table
ALTER TABLE "page_views" ADD COLUMN "idempotency_operation" bytea NULL;
-- Modify "payments" table
ALTER TABLE "payments" ADD COLUMN "idempotency_operation" bytea NULL;
-- Modify "refunds" table
ALTER TABLE "refunds" ADD COLUMN "idempotency_operation" bytea NULL;
