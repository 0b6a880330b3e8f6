import { type Kysely, sql } from "kysely";

// Agent payments over x402 (issue 40, D23): each agent wallet's spending policy, and the payment
// authorizations its key signs (domain/agent-payment-state.ts). An authorization's amount counts
// against the caps from the moment it is recorded (a reservation) while its status is
// approval_required, authorized or settled; the caps' sums read the wallet's rows of one currency
// since the start of the UTC month (agent_payment_authorizations_reserved).
export async function up(db: Kysely<unknown>): Promise<void> {
  // One row per agent wallet that has a policy; a null field is no limit. Amounts are JSON objects
  // of currency → smallest units as an integer string.
  await sql`
    CREATE TABLE agent_wallet_policies (
      wallet_id uuid PRIMARY KEY REFERENCES agent_wallets(id),
      workspace_id uuid NOT NULL REFERENCES workspaces(id),
      environment text NOT NULL CHECK (environment IN ('sandbox', 'live')),
      max_per_payment jsonb,
      daily jsonb,
      monthly jsonb,
      allowed_payees jsonb,
      allowed_origins jsonb,
      approval_above jsonb,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now()
    )`.execute(db);

  // `payment_required`: the server's PaymentRequired with the chosen requirement alone in
  // `accepts`, what an approval signs later. `nonce` (bytes32 hex) and the validity window are set
  // when it is signed; the facilitator side finds an authorization by its nonce (unique: 32 random
  // bytes) and the payer (`payer`, the wallet's address, the authorization's `from`).
  await sql`
    CREATE TABLE agent_payment_authorizations (
      id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
      workspace_id uuid NOT NULL REFERENCES workspaces(id),
      environment text NOT NULL CHECK (environment IN ('sandbox', 'live')),
      wallet_id uuid NOT NULL REFERENCES agent_wallets(id),
      payer text NOT NULL,
      network text NOT NULL,
      caip2 text NOT NULL,
      asset text NOT NULL,
      currency text NOT NULL,
      amount numeric(78, 0) NOT NULL CHECK (amount > 0),
      pay_to text NOT NULL,
      resource_url text NOT NULL,
      resource_origin text NOT NULL,
      payment_required jsonb NOT NULL,
      nonce text UNIQUE,
      valid_after timestamptz,
      valid_before timestamptz,
      status text NOT NULL
        CHECK (status IN ('approval_required', 'authorized', 'denied', 'settled', 'expired')),
      created_at timestamptz NOT NULL DEFAULT now(),
      decided_at timestamptz,
      tx_hash text,
      -- An approved payment's PAYMENT-SIGNATURE value, encrypted, for its agent to read until it
      -- ends (a pay that is authorized at once answers it and keeps none).
      payment_signature text,
      CHECK (status NOT IN ('authorized', 'settled') OR (nonce IS NOT NULL AND valid_before IS NOT NULL))
    )`.execute(db);
  // The caps' sums: one wallet's reserving rows of one currency since a time.
  await sql`
    CREATE INDEX agent_payment_authorizations_reserved
      ON agent_payment_authorizations (wallet_id, currency, created_at)
      WHERE status IN ('approval_required', 'authorized', 'settled')`.execute(db);
  // A wallet's list, newest first, optionally of one status.
  await sql`
    CREATE INDEX agent_payment_authorizations_list
      ON agent_payment_authorizations (wallet_id, created_at DESC, id DESC)`.execute(db);
  // What the expiry of unused authorizations will read.
  await sql`
    CREATE INDEX agent_payment_authorizations_open
      ON agent_payment_authorizations (valid_before) WHERE status = 'authorized'`.execute(db);
}

export async function down(): Promise<void> {
  throw new Error("the agent policies migration is not reversible");
}
