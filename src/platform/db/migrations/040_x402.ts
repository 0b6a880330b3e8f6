import { type Kysely, sql } from "kysely";

// The x402 facilitator (issue 40, D23).
// - payments.x402: a payment settled through the facilitator, `{payer, resource, scheme, nonce,
//   txHash}`. The chain watcher matches such a payment by the transaction its facilitator signed
//   for it (txHash, written with that transaction's record before it is broadcast), never by amount.
// - x402_settlements: one row per settle asked for. A payer's authorization (its token contract,
//   payer and nonce on a network) is settled at most once unless that settle failed; a
//   payment-identifier is answered once per workspace and environment (same payload: the same
//   answer; another payload: 409).
// - x402_facilitator_wallets: the wallet each workspace's settlements are sent (and their gas paid)
//   from, kept apart from the wallets whose money is reserved for payouts and settlements.
// - sandbox_authorizations: the EIP-3009 nonces used on the simulated ledger (its tokens' state).
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE payments ADD COLUMN x402 jsonb`.execute(db);
  await sql`CREATE INDEX payments_x402_tx ON payments ((x402->>'txHash')) WHERE x402 IS NOT NULL`.execute(db);
  await sql`
    CREATE TABLE x402_settlements (
      id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
      workspace_id uuid NOT NULL REFERENCES workspaces(id),
      environment text NOT NULL CHECK (environment IN ('sandbox', 'live')),
      network text NOT NULL,
      asset text NOT NULL,
      payer text NOT NULL,
      nonce text NOT NULL,
      identifier text,
      fingerprint text NOT NULL,
      payment_id uuid REFERENCES payments(id),
      status text NOT NULL CHECK (status IN ('settling', 'settled', 'failed')),
      response jsonb,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now()
    )`.execute(db);
  await sql`
    CREATE UNIQUE INDEX x402_settlements_authorization
      ON x402_settlements (environment, network, asset, payer, nonce) WHERE status <> 'failed'`.execute(db);
  await sql`
    CREATE UNIQUE INDEX x402_settlements_identifier
      ON x402_settlements (workspace_id, environment, identifier) WHERE identifier IS NOT NULL`.execute(db);
  await sql`
    CREATE TABLE x402_facilitator_wallets (
      workspace_id uuid PRIMARY KEY REFERENCES workspaces(id),
      address text NOT NULL UNIQUE,
      encrypted_private_key text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now()
    )`.execute(db);
  await sql`
    CREATE TABLE sandbox_authorizations (
      network text NOT NULL,
      token_symbol text NOT NULL,
      authorizer text NOT NULL,
      nonce text NOT NULL,
      tx_hash text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (network, token_symbol, authorizer, nonce)
    )`.execute(db);
}

export async function down(): Promise<void> {
  throw new Error("the x402 migration is not reversible");
}
