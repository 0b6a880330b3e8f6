import { type Kysely, sql } from "kysely";

// Token swaps (D16).
// - A swap takes money out of a workspace wallet like a payout: a row of the payouts table of kind
//   `swap` (token and amount: the most it may sell; destination: the router, or the sandbox's
//   pool), so that the balance reservation, the breaker, the record before broadcast and the
//   reconciler cover it unchanged. What only a swap has is in `swaps`, keyed by that transfer's id:
//   its pair, the quote it executes, its limits and, once the chain tells, what it sold and bought.
// - A quote is stored for its 30 seconds so that `POST /swap {quoteId}` executes what was shown.
// - The sandbox's constant-product pools (one set per workspace, so that no tenant sees another's
//   trades in its prices): their reserves, locked by the swap that trades against them.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE payouts DROP CONSTRAINT payouts_kind_check`.execute(db);
  await sql`
    ALTER TABLE payouts ADD CONSTRAINT payouts_kind_check
      CHECK (kind IN ('payout', 'refund', 'return', 'swap'))`.execute(db);
  await sql`ALTER TABLE payouts DROP CONSTRAINT payouts_kind_subject`.execute(db);
  await sql`
    ALTER TABLE payouts ADD CONSTRAINT payouts_kind_subject CHECK (
      (kind IN ('payout', 'swap') AND payment_id IS NULL AND unmatched_transfer_id IS NULL)
      OR (kind = 'refund' AND payment_id IS NOT NULL AND unmatched_transfer_id IS NULL)
      OR (kind = 'return' AND payment_id IS NULL AND unmatched_transfer_id IS NOT NULL))`.execute(db);

  await sql`
    CREATE TABLE swap_quotes (
      id uuid PRIMARY KEY,
      workspace_id uuid NOT NULL REFERENCES workspaces (id),
      environment text NOT NULL,
      sell_token text NOT NULL,
      buy_token text NOT NULL CHECK (buy_token <> sell_token),
      side text NOT NULL CHECK (side IN ('exact_in', 'exact_out')),
      sell_amount numeric(78, 0) NOT NULL CHECK (sell_amount > 0),
      buy_amount numeric(78, 0) NOT NULL CHECK (buy_amount > 0),
      min_buy_amount numeric(78, 0) NOT NULL CHECK (min_buy_amount > 0),
      max_sell_amount numeric(78, 0) NOT NULL CHECK (max_sell_amount >= sell_amount),
      slippage_bps integer NOT NULL CHECK (slippage_bps BETWEEN 0 AND 1000),
      price_impact_bps integer NOT NULL,
      wallet_type text NOT NULL,
      from_address text NOT NULL,
      route jsonb NOT NULL,
      gas_estimate numeric(78, 0) NOT NULL,
      expires_at timestamptz NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now()
    )`.execute(db);
  await sql`CREATE INDEX swap_quotes_expiry ON swap_quotes (expires_at)`.execute(db);

  await sql`
    CREATE TABLE swaps (
      -- Checked at commit: the swap's guard records it first, in the transaction that then
      -- records its transfer.
      id uuid PRIMARY KEY REFERENCES payouts (id) DEFERRABLE INITIALLY DEFERRED,
      workspace_id uuid NOT NULL REFERENCES workspaces (id),
      environment text NOT NULL,
      quote_id uuid REFERENCES swap_quotes (id),
      sell_token text NOT NULL,
      buy_token text NOT NULL CHECK (buy_token <> sell_token),
      side text NOT NULL CHECK (side IN ('exact_in', 'exact_out')),
      quoted_sell_amount numeric(78, 0) NOT NULL CHECK (quoted_sell_amount > 0),
      quoted_buy_amount numeric(78, 0) NOT NULL CHECK (quoted_buy_amount > 0),
      min_buy_amount numeric(78, 0) NOT NULL CHECK (min_buy_amount > 0),
      max_sell_amount numeric(78, 0) NOT NULL CHECK (max_sell_amount > 0),
      slippage_bps integer NOT NULL,
      route jsonb NOT NULL,
      sold_amount numeric(78, 0) CHECK (sold_amount > 0 AND sold_amount <= max_sell_amount),
      bought_amount numeric(78, 0) CHECK (bought_amount >= min_buy_amount),
      created_at timestamptz NOT NULL
    )`.execute(db);
  // A quote is executed at most once (its idempotency key aside, a second POST of it is refused).
  await sql`CREATE UNIQUE INDEX swaps_one_per_quote ON swaps (quote_id) WHERE quote_id IS NOT NULL`.execute(
    db,
  );
  await sql`CREATE INDEX swaps_by_workspace ON swaps (workspace_id, environment, created_at DESC, id DESC)`.execute(
    db,
  );

  await sql`
    CREATE TABLE sandbox_swap_pools (
      workspace_id uuid NOT NULL REFERENCES workspaces (id),
      pair text NOT NULL,
      base_reserve numeric(78, 0) NOT NULL CHECK (base_reserve > 0),
      quote_reserve numeric(78, 0) NOT NULL CHECK (quote_reserve > 0),
      PRIMARY KEY (workspace_id, pair)
    )`.execute(db);
}
