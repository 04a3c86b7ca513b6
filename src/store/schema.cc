// The schema, as migrations; see schema.h and docs/wallet-ledger.md for what the tables mean.
#include "store/schema.h"

namespace agentpay {

const std::vector<Migration>& Migrations() {
  static const std::vector<Migration> kMigrations = {
      {1, "accounts, deposits, ledger, operations, idempotency keys, trace",
       R"sql(
CREATE TABLE accounts (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  api_key_hash TEXT NOT NULL UNIQUE,
  deposited BIGINT NOT NULL DEFAULT 0 CHECK (deposited >= 0),
  captured BIGINT NOT NULL DEFAULT 0 CHECK (captured >= 0 AND captured <= deposited),
  held BIGINT NOT NULL DEFAULT 0 CHECK (held >= 0 AND held <= deposited - captured),
  created_ms BIGINT NOT NULL
);
CREATE TABLE deposits (
  account_id TEXT NOT NULL REFERENCES accounts(id),
  reference TEXT NOT NULL,
  amount BIGINT NOT NULL CHECK (amount > 0),
  created_ms BIGINT NOT NULL,
  PRIMARY KEY (account_id, reference)
);
CREATE TABLE ledger_entries (
  id INTEGER PRIMARY KEY,
  operation_id TEXT,
  kind TEXT NOT NULL,
  debit TEXT NOT NULL,
  credit TEXT NOT NULL,
  amount BIGINT NOT NULL CHECK (amount > 0),
  at_ms BIGINT NOT NULL
);
CREATE INDEX ledger_entries_operation ON ledger_entries (operation_id);
CREATE TABLE operations (
  id TEXT PRIMARY KEY,
  principal TEXT NOT NULL,
  idempotency_key TEXT NOT NULL,
  fingerprint TEXT NOT NULL,
  route TEXT NOT NULL,
  amount BIGINT NOT NULL,
  intent TEXT NOT NULL,
  settlement TEXT NOT NULL,
  fulfillment TEXT NOT NULL,
  hold_expires_ms BIGINT,
  lease_expires_ms BIGINT NOT NULL,
  attempts INTEGER NOT NULL,
  response_status INTEGER,
  response_content_type TEXT,
  response_body BLOB,
  retained_until_ms BIGINT,
  created_ms BIGINT NOT NULL,
  updated_ms BIGINT NOT NULL
);
-- Partial indexes: an operation sits in them only while unfinished, so they stay small and hot.
CREATE INDEX operations_in_progress ON operations (id) WHERE fulfillment = 'in_progress';
CREATE INDEX operations_held ON operations (hold_expires_ms) WHERE settlement = 'held';
CREATE TABLE idempotency_keys (
  principal TEXT NOT NULL,
  key TEXT NOT NULL,
  operation_id TEXT NOT NULL,  -- inserted before its operation: the key reservation comes first
  fingerprint TEXT NOT NULL,
  created_ms BIGINT NOT NULL,
  PRIMARY KEY (principal, key)
) WITHOUT ROWID;
CREATE TABLE operation_events (
  id INTEGER PRIMARY KEY,
  operation_id TEXT NOT NULL,
  at_ms BIGINT NOT NULL,
  actor TEXT NOT NULL,
  kind TEXT NOT NULL,
  detail TEXT NOT NULL
);
CREATE INDEX operation_events_operation ON operation_events (operation_id, id);
)sql",
       R"sql(
CREATE TABLE accounts (
  id TEXT COLLATE "C" PRIMARY KEY,
  name TEXT COLLATE "C" NOT NULL,
  api_key_hash TEXT COLLATE "C" NOT NULL UNIQUE,
  deposited BIGINT NOT NULL DEFAULT 0 CHECK (deposited >= 0),
  captured BIGINT NOT NULL DEFAULT 0 CHECK (captured >= 0 AND captured <= deposited),
  held BIGINT NOT NULL DEFAULT 0 CHECK (held >= 0 AND held <= deposited - captured),
  created_ms BIGINT NOT NULL
);
CREATE TABLE deposits (
  account_id TEXT COLLATE "C" NOT NULL REFERENCES accounts(id),
  reference TEXT COLLATE "C" NOT NULL,
  amount BIGINT NOT NULL CHECK (amount > 0),
  created_ms BIGINT NOT NULL,
  PRIMARY KEY (account_id, reference)
);
CREATE TABLE ledger_entries (
  id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  operation_id TEXT COLLATE "C",
  kind TEXT COLLATE "C" NOT NULL,
  debit TEXT COLLATE "C" NOT NULL,
  credit TEXT COLLATE "C" NOT NULL,
  amount BIGINT NOT NULL CHECK (amount > 0),
  at_ms BIGINT NOT NULL
);
CREATE INDEX ledger_entries_operation ON ledger_entries (operation_id);
CREATE TABLE operations (
  id TEXT COLLATE "C" PRIMARY KEY,
  principal TEXT COLLATE "C" NOT NULL,
  idempotency_key TEXT COLLATE "C" NOT NULL,
  fingerprint TEXT COLLATE "C" NOT NULL,
  route TEXT COLLATE "C" NOT NULL,
  amount BIGINT NOT NULL,
  intent TEXT COLLATE "C" NOT NULL,
  settlement TEXT COLLATE "C" NOT NULL,
  fulfillment TEXT COLLATE "C" NOT NULL,
  hold_expires_ms BIGINT,
  lease_expires_ms BIGINT NOT NULL,
  attempts INTEGER NOT NULL,
  response_status INTEGER,
  response_content_type TEXT COLLATE "C",
  response_body BYTEA,
  retained_until_ms BIGINT,
  created_ms BIGINT NOT NULL,
  updated_ms BIGINT NOT NULL
);
-- Partial indexes: an operation sits in them only while unfinished, so they stay small and hot.
CREATE INDEX operations_in_progress ON operations (id) WHERE fulfillment = 'in_progress';
CREATE INDEX operations_held ON operations (hold_expires_ms) WHERE settlement = 'held';
CREATE TABLE idempotency_keys (
  principal TEXT COLLATE "C" NOT NULL,
  key TEXT COLLATE "C" NOT NULL,
  operation_id TEXT COLLATE "C" NOT NULL,  -- inserted before its operation: the key reservation comes first
  fingerprint TEXT COLLATE "C" NOT NULL,
  created_ms BIGINT NOT NULL,
  PRIMARY KEY (principal, key)
);
CREATE TABLE operation_events (
  id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  operation_id TEXT COLLATE "C" NOT NULL,
  at_ms BIGINT NOT NULL,
  actor TEXT COLLATE "C" NOT NULL,
  kind TEXT COLLATE "C" NOT NULL,
  detail TEXT COLLATE "C" NOT NULL
);
CREATE INDEX operation_events_operation ON operation_events (operation_id, id);
)sql"},
      {2, "alerts",
       R"sql(
CREATE TABLE alerts (
  id TEXT PRIMARY KEY,
  operation_id TEXT NOT NULL,
  kind TEXT NOT NULL,
  detail TEXT NOT NULL,
  created_ms BIGINT NOT NULL,
  resolved_ms BIGINT,
  resolution TEXT NOT NULL DEFAULT ''
);
CREATE INDEX alerts_created ON alerts (created_ms);
)sql",
       R"sql(
CREATE TABLE alerts (
  id TEXT COLLATE "C" PRIMARY KEY,
  operation_id TEXT COLLATE "C" NOT NULL,
  kind TEXT COLLATE "C" NOT NULL,
  detail TEXT COLLATE "C" NOT NULL,
  created_ms BIGINT NOT NULL,
  resolved_ms BIGINT,
  resolution TEXT COLLATE "C" NOT NULL DEFAULT ''
);
CREATE INDEX alerts_created ON alerts (created_ms);
)sql"},
      {3, "x402 payments and the relayer's nonce",
       R"sql(
CREATE TABLE x402_payments (
  operation_id TEXT PRIMARY KEY,
  payer TEXT NOT NULL,
  nonce TEXT NOT NULL,
  valid_after_s BIGINT NOT NULL,
  valid_before_s BIGINT NOT NULL,
  value BIGINT NOT NULL CHECK (value > 0),
  pay_to TEXT NOT NULL,
  signature TEXT NOT NULL,
  x402_version INTEGER NOT NULL,
  tx_hash TEXT NOT NULL DEFAULT '',
  raw_tx TEXT NOT NULL DEFAULT '',
  relayer TEXT NOT NULL DEFAULT '',
  relayer_nonce BIGINT NOT NULL DEFAULT -1,
  submitted_ms BIGINT NOT NULL DEFAULT 0,
  broadcasts BIGINT NOT NULL DEFAULT 0,
  UNIQUE (payer, nonce)  -- one authorization pays for one operation
);
CREATE INDEX x402_payments_relayer_nonce ON x402_payments (relayer, relayer_nonce);
CREATE TABLE relayer_nonces (
  relayer TEXT PRIMARY KEY,
  next_nonce BIGINT NOT NULL CHECK (next_nonce >= 0)
);
-- Unresolved settlements, for the reconciler (one index per literal, so that SQLite uses them).
CREATE INDEX operations_submitted ON operations (id) WHERE settlement = 'submitted';
CREATE INDEX operations_unknown ON operations (id) WHERE settlement = 'unknown';
)sql",
       R"sql(
CREATE TABLE x402_payments (
  operation_id TEXT COLLATE "C" PRIMARY KEY,
  payer TEXT COLLATE "C" NOT NULL,
  nonce TEXT COLLATE "C" NOT NULL,
  valid_after_s BIGINT NOT NULL,
  valid_before_s BIGINT NOT NULL,
  value BIGINT NOT NULL CHECK (value > 0),
  pay_to TEXT COLLATE "C" NOT NULL,
  signature TEXT COLLATE "C" NOT NULL,
  x402_version INTEGER NOT NULL,
  tx_hash TEXT COLLATE "C" NOT NULL DEFAULT '',
  raw_tx TEXT COLLATE "C" NOT NULL DEFAULT '',
  relayer TEXT COLLATE "C" NOT NULL DEFAULT '',
  relayer_nonce BIGINT NOT NULL DEFAULT -1,
  submitted_ms BIGINT NOT NULL DEFAULT 0,
  broadcasts BIGINT NOT NULL DEFAULT 0,
  UNIQUE (payer, nonce)  -- one authorization pays for one operation
);
CREATE INDEX x402_payments_relayer_nonce ON x402_payments (relayer, relayer_nonce);
CREATE TABLE relayer_nonces (
  relayer TEXT COLLATE "C" PRIMARY KEY,
  next_nonce BIGINT NOT NULL CHECK (next_nonce >= 0)
);
-- Unresolved settlements, for the reconciler (one index per state, as on SQLite).
CREATE INDEX operations_submitted ON operations (id) WHERE settlement = 'submitted';
CREATE INDEX operations_unknown ON operations (id) WHERE settlement = 'unknown';
)sql"},
      {4, "alert resolutions, retention pruning",
       R"sql(
ALTER TABLE alerts ADD COLUMN note TEXT NOT NULL DEFAULT '';
CREATE INDEX alerts_operation ON alerts (operation_id);
-- Stored results the pruner has yet to forget (a pruned operation's body is NULL: it leaves).
CREATE INDEX operations_retained ON operations (retained_until_ms) WHERE response_body IS NOT NULL;
)sql",
       R"sql(
ALTER TABLE alerts ADD COLUMN note TEXT COLLATE "C" NOT NULL DEFAULT '';
CREATE INDEX alerts_operation ON alerts (operation_id);
-- Stored results the pruner has yet to forget (a pruned operation's body is NULL: it leaves).
CREATE INDEX operations_retained ON operations (retained_until_ms) WHERE response_body IS NOT NULL;
)sql"},
      {5, "the gateway process instance holding an operation's claim",
       R"sql(
-- Set with lease_expires_ms when an attempt claims the operation; crash recovery takes over only
-- claims whose instance is no longer alive (Store::InstanceAlive). '' on rows from before.
ALTER TABLE operations ADD COLUMN claimed_by TEXT NOT NULL DEFAULT '';
)sql",
       R"sql(
-- Set with lease_expires_ms when an attempt claims the operation; crash recovery takes over only
-- claims whose instance is no longer alive (Store::InstanceAlive). '' on rows from before.
ALTER TABLE operations ADD COLUMN claimed_by TEXT COLLATE "C" NOT NULL DEFAULT '';
)sql"},
      {6, "API keys: several per account, each revocable (issue 13)",
       R"sql(
-- accounts.api_key_hash stays as the account's first key, and is no longer read: every key an
-- account has, the first included, is a row here. A key authenticates while revoked_ms is NULL.
CREATE TABLE api_keys (
  id TEXT PRIMARY KEY,
  account_id TEXT NOT NULL REFERENCES accounts(id),
  key_hash TEXT NOT NULL UNIQUE,
  created_ms BIGINT NOT NULL,
  revoked_ms BIGINT
);
CREATE INDEX api_keys_account ON api_keys (account_id, created_ms);
INSERT INTO api_keys (id, account_id, key_hash, created_ms)
  SELECT 'key_' || substr(api_key_hash, 1, 16), id, api_key_hash, created_ms FROM accounts;
)sql",
       R"sql(
-- accounts.api_key_hash stays as the account's first key, and is no longer read: every key an
-- account has, the first included, is a row here. A key authenticates while revoked_ms is NULL.
CREATE TABLE api_keys (
  id TEXT COLLATE "C" PRIMARY KEY,
  account_id TEXT COLLATE "C" NOT NULL REFERENCES accounts(id),
  key_hash TEXT COLLATE "C" NOT NULL UNIQUE,
  created_ms BIGINT NOT NULL,
  revoked_ms BIGINT
);
CREATE INDEX api_keys_account ON api_keys (account_id, created_ms);
INSERT INTO api_keys (id, account_id, key_hash, created_ms)
  SELECT 'key_' || substr(api_key_hash, 1, 16), id, api_key_hash, created_ms FROM accounts;
)sql"},
      {7, "replaced relayer transactions, settled blocks (issue 14)",
       R"sql(
-- The signed transactions (hex) a stuck one replaced at the same relayer nonce with a lower fee:
-- space-separated, oldest first; any of them may be the one mined.
ALTER TABLE x402_payments ADD COLUMN replaced_raw_txs TEXT NOT NULL DEFAULT '';
-- The block holding a settled payment's receipt and when it was seen: the reconciler watches
-- recent ones for reorganisations.
ALTER TABLE x402_payments ADD COLUMN settled_block BIGINT NOT NULL DEFAULT -1;
ALTER TABLE x402_payments ADD COLUMN settled_block_hash TEXT NOT NULL DEFAULT '';
ALTER TABLE x402_payments ADD COLUMN settled_ms BIGINT NOT NULL DEFAULT 0;
-- Newest block first, read once a second: the index gives the order, the scan stops at the limit.
CREATE INDEX x402_payments_settled
  ON x402_payments (settled_block, settled_block_hash, operation_id) WHERE settled_ms > 0;
)sql",
       R"sql(
-- The signed transactions (hex) a stuck one replaced at the same relayer nonce with a lower fee:
-- space-separated, oldest first; any of them may be the one mined.
ALTER TABLE x402_payments ADD COLUMN replaced_raw_txs TEXT COLLATE "C" NOT NULL DEFAULT '';
-- The block holding a settled payment's receipt and when it was seen: the reconciler watches
-- recent ones for reorganisations.
ALTER TABLE x402_payments ADD COLUMN settled_block BIGINT NOT NULL DEFAULT -1;
ALTER TABLE x402_payments ADD COLUMN settled_block_hash TEXT COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE x402_payments ADD COLUMN settled_ms BIGINT NOT NULL DEFAULT 0;
-- Newest block first, read once a second: the index gives the order, the scan stops at the limit.
CREATE INDEX x402_payments_settled
  ON x402_payments (settled_block, settled_block_hash, operation_id) WHERE settled_ms > 0;
)sql"},
      {8, "the operator console's lookups (issue 16)",
       R"sql(
-- An account's or a payer's operations, newest first; an operation by its transaction. (Not the
-- ledger by time: two more index entries per paid request cost the wallet path about 6%; the
-- overview's "captured today" reads the ledger's captures and refunds instead.)
CREATE INDEX operations_principal ON operations (principal, id);
CREATE INDEX x402_payments_tx_hash ON x402_payments (tx_hash);
)sql",
       R"sql(
-- An account's or a payer's operations, newest first; an operation by its transaction. (Not the
-- ledger by time: two more index entries per paid request cost the wallet path about 6%; the
-- overview's "captured today" reads the ledger's captures and refunds instead.)
CREATE INDEX operations_principal ON operations (principal, id);
CREATE INDEX x402_payments_tx_hash ON x402_payments (tx_hash);
)sql"},
      {9, "structured trace facts, recorded repeated arrivals (issue 16)",
       R"sql(
-- The structured facts of a trace event beside its text (0, NULL, '' or -1 where none applies).
ALTER TABLE operation_events ADD COLUMN attempt INTEGER NOT NULL DEFAULT 0;
ALTER TABLE operation_events ADD COLUMN amount BIGINT;
ALTER TABLE operation_events ADD COLUMN http_status INTEGER NOT NULL DEFAULT 0;
ALTER TABLE operation_events ADD COLUMN tx_hash TEXT NOT NULL DEFAULT '';
ALTER TABLE operation_events ADD COLUMN block_number BIGINT NOT NULL DEFAULT -1;
ALTER TABLE operation_events ADD COLUMN reason TEXT NOT NULL DEFAULT '';
-- How many repeated arrivals of a key its trace recorded (at most kMaxRecordedArrivals).
ALTER TABLE idempotency_keys ADD COLUMN arrivals_recorded INTEGER NOT NULL DEFAULT 0;
)sql",
       R"sql(
-- The structured facts of a trace event beside its text (0, NULL, '' or -1 where none applies).
ALTER TABLE operation_events ADD COLUMN attempt INTEGER NOT NULL DEFAULT 0;
ALTER TABLE operation_events ADD COLUMN amount BIGINT;
ALTER TABLE operation_events ADD COLUMN http_status INTEGER NOT NULL DEFAULT 0;
ALTER TABLE operation_events ADD COLUMN tx_hash TEXT COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE operation_events ADD COLUMN block_number BIGINT NOT NULL DEFAULT -1;
ALTER TABLE operation_events ADD COLUMN reason TEXT COLLATE "C" NOT NULL DEFAULT '';
-- How many repeated arrivals of a key its trace recorded (at most kMaxRecordedArrivals).
ALTER TABLE idempotency_keys ADD COLUMN arrivals_recorded INTEGER NOT NULL DEFAULT 0;
)sql"},
      {10, "unpaid x402 operations waiting for a retry, for the sweeper",
       R"sql(
CREATE INDEX operations_unpaid_retry ON operations (id)
  WHERE settlement = 'none' AND fulfillment = 'pending_retry';
)sql",
       R"sql(
CREATE INDEX operations_unpaid_retry ON operations (id)
  WHERE settlement = 'none' AND fulfillment = 'pending_retry';
)sql"},
      {11, "the PostgreSQL writers' batch counter and checked row counts",
       R"sql(
-- Nothing: SQLite has one writer, whose statements report their row counts as they run.
)sql",
       R"sql(
-- Every writers' batch takes the next value under the writers' lock: a gateway whose batch number
-- is not one past its previous one knows another gateway wrote in between (postgres_store.cc).
CREATE SEQUENCE writer_batches;
-- Fails a pipelined write that changed another number of rows than it must, so that the server
-- skips what was sent after it (pg_connection.cc, Defer).
CREATE FUNCTION agentpay_expect_changed(changed BIGINT, expected BIGINT) RETURNS BIGINT
LANGUAGE plpgsql AS $$
BEGIN
  IF changed <> expected THEN
    RAISE EXCEPTION 'changed % rows, expected %', changed, expected USING ERRCODE = 'AP001';
  END IF;
  RETURN changed;
END
$$;
)sql"},
      {12, "payer reservations shared by the gateways of one database",
       R"sql(
-- A payer's x402 payment that may still move its money, reserved against its balance in the
-- decision that stores the operation; dropped when the payment is final (core/payer_reservations.h).
CREATE TABLE payer_reservations (
  network TEXT NOT NULL,
  asset TEXT NOT NULL,
  payer TEXT NOT NULL,
  nonce TEXT NOT NULL,
  operation_id TEXT NOT NULL UNIQUE,
  amount BIGINT NOT NULL CHECK (amount > 0),
  valid_before_s BIGINT NOT NULL,
  PRIMARY KEY (network, asset, payer, nonce)
);
-- Moves on by the amount of every reservation dropped: a balance read before may still show
-- money that settlement took.
CREATE TABLE payer_epochs (
  network TEXT NOT NULL,
  asset TEXT NOT NULL,
  payer TEXT NOT NULL,
  epoch BIGINT NOT NULL DEFAULT 0,
  PRIMARY KEY (network, asset, payer)
);
)sql",
       R"sql(
CREATE TABLE payer_reservations (
  network TEXT COLLATE "C" NOT NULL,
  asset TEXT COLLATE "C" NOT NULL,
  payer TEXT COLLATE "C" NOT NULL,
  nonce TEXT COLLATE "C" NOT NULL,
  operation_id TEXT COLLATE "C" NOT NULL UNIQUE,
  amount BIGINT NOT NULL CHECK (amount > 0),
  valid_before_s BIGINT NOT NULL,
  PRIMARY KEY (network, asset, payer, nonce)
);
CREATE TABLE payer_epochs (
  network TEXT COLLATE "C" NOT NULL,
  asset TEXT COLLATE "C" NOT NULL,
  payer TEXT COLLATE "C" NOT NULL,
  epoch BIGINT NOT NULL DEFAULT 0,
  PRIMARY KEY (network, asset, payer)
);
)sql"},
      {13, "rate limit usage shared by the gateways of one database",
       R"sql(
-- Tokens taken per rate limit key and window (gateway/rate_sync.h): each gateway adds what it took
-- and debits its own buckets with what the others took.
CREATE TABLE rate_usage (
  kind TEXT NOT NULL,
  key TEXT NOT NULL,
  window_start_ms BIGINT NOT NULL,
  count BIGINT NOT NULL CHECK (count >= 0),
  updated_ms BIGINT NOT NULL,
  PRIMARY KEY (kind, key, window_start_ms)
);
CREATE INDEX rate_usage_updated ON rate_usage (updated_ms);
)sql",
       R"sql(
CREATE TABLE rate_usage (
  kind TEXT COLLATE "C" NOT NULL,
  key TEXT COLLATE "C" NOT NULL,
  window_start_ms BIGINT NOT NULL,
  count BIGINT NOT NULL CHECK (count >= 0),
  updated_ms BIGINT NOT NULL,
  PRIMARY KEY (kind, key, window_start_ms)
);
CREATE INDEX rate_usage_updated ON rate_usage (updated_ms);
)sql"},
      {14, "the writers' batch that last wrote an account's balances (PostgreSQL)",
       R"sql(
-- SQLite has one writer per file at a time and keeps no balances between its batches: nothing here.
)sql",
       R"sql(
-- Each writer's batch stamps the balances it writes with its number (writer_batches), so that the
-- next batch of another gateway reads only the accounts changed since its own last batch instead
-- of forgetting every balance it keeps (postgres_store.cc, Begin).
ALTER TABLE accounts ADD COLUMN written_batch BIGINT NOT NULL DEFAULT 0;
CREATE INDEX accounts_written_batch ON accounts (written_batch);
)sql"},
      {15, "the accounts each writers' batch wrote, logged apart from the balances (PostgreSQL)",
       R"sql(
-- SQLite has one writer per file at a time and keeps no balances between its batches: nothing here.
)sql",
       R"sql(
-- An update that changes an indexed column is never made in place (a heap-only tuple, HOT): with
-- the index on written_batch, every balance write was a new row version with a new entry in each
-- of the table's three indexes. A batch now logs the accounts it wrote in one row here instead,
-- which the next batch of another gateway reads (postgres_store.cc, Begin), and the balance
-- writes touch no index. written_batch is still stamped, for gateways from before this
-- migration that still run beside newer ones (without its index they read the whole table).
DROP INDEX accounts_written_batch;
CREATE TABLE accounts_written (
  batch BIGINT NOT NULL,
  account_ids TEXT[] COLLATE "C" NOT NULL
);
CREATE INDEX accounts_written_batch ON accounts_written (batch);
)sql"},
  };
  return kMigrations;
}

}  // namespace agentpay
