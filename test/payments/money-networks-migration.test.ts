import { randomBytes, randomUUID } from "node:crypto";
import { sql } from "kysely";
import { describe, expect, it } from "vitest";
import { type Db, openDatabase } from "../../src/platform/db/database.ts";
import { migratorUpTo } from "../support/migrations.ts";

// Migration 033 on a database with history: every money record of before was on its
// environment's one network. Live's is `default`; the sandbox's is `default` where a chain is
// evidenced (the watcher's claim, a chain transaction signed for the payout, a hash that is not the
// ledger's, a Uniswap route, the card provider's on-ramp), else the ledger's `sandbox-a`; card
// payments have none. Writers must name the network from then on.

const hex = (bytes: number) => `0x${randomBytes(bytes).toString("hex")}`;
const ADDRESS = `0x${"Ab".repeat(20)}`;

async function workspace(db: Db): Promise<string> {
  const row = await sql<{
    id: string;
  }>`INSERT INTO workspaces (name) VALUES ('before networks') RETURNING id`.execute(db);
  return (row.rows[0] as { id: string }).id;
}

async function payment(
  db: Db,
  ws: string,
  environment: string,
  method: "crypto" | "card",
  detectedTx: string | null,
): Promise<string> {
  const row = await sql<{ id: string }>`
    INSERT INTO payments (workspace_id, environment, status, payment_method, payment_provider,
                          token_symbol, gross_amount, fee_amount, net_amount, wallet_type,
                          receiving_address, expires_at, detected_tx_hash, detected_log_index)
    VALUES (${ws}, ${environment}, ${detectedTx ? "forwarded" : "pending"}, ${method},
            ${method === "card" ? "card" : "onchain"}, ${method === "card" ? "USD" : "USDC"}, 5, 0, 5,
            'eoa', ${ADDRESS}, now(), ${detectedTx}, ${detectedTx ? 0 : null})
    RETURNING id`.execute(db);
  return (row.rows[0] as { id: string }).id;
}

async function observe(db: Db, environment: string, txHash: string): Promise<void> {
  await sql`
    INSERT INTO observed_transfers (environment, tx_hash, token_symbol, to_address, ordinal, log_index,
                                    block_number, claim)
    VALUES (${environment}, ${txHash}, 'USDC', ${ADDRESS.toLowerCase()}, 0, 0, 7, 'payment')`.execute(db);
}

async function ledgerTx(db: Db, txHash: string): Promise<void> {
  await sql`
    INSERT INTO ledger_transactions (tx_hash, from_address, to_address, token_symbol, amount, status)
    VALUES (${txHash}, ${ADDRESS}, ${ADDRESS}, 'USDC', 5, 'success')`.execute(db);
}

async function payout(db: Db, ws: string, environment: string, txHash: string | null): Promise<string> {
  const row = await sql<{ id: string }>`
    INSERT INTO payouts (workspace_id, environment, status, token_symbol, amount, destination_address,
                         from_address, wallet_type, tx_hash)
    VALUES (${ws}, ${environment}, ${txHash ? "completed" : "failed"}, 'USDC', 5, ${ADDRESS}, ${ADDRESS},
            'eoa', ${txHash})
    RETURNING id`.execute(db);
  return (row.rows[0] as { id: string }).id;
}

async function networkOf(db: Db, table: string, id: string): Promise<string | null> {
  const row = await sql<{ network: string | null }>`
    SELECT network FROM ${sql.table(table)} WHERE id = ${id}`.execute(db);
  return (row.rows[0] as { network: string | null }).network;
}

describe("migration 033 on a database with history", () => {
  it("puts each money record on the network it was on, and writers must name one from then on", async () => {
    const { db, close } = await openDatabase({});
    try {
      expect((await migratorUpTo(db, "032_chain_cursor_networks").migrateToLatest()).error).toBeUndefined();
      const ws = await workspace(db);

      // Payments: live; a sandbox one paid on the ledger; a sandbox one the watcher saw; a card one.
      const liveTx = hex(32);
      await observe(db, "live", liveTx);
      const live = await payment(db, ws, "live", "crypto", liveTx);
      const livePending = await payment(db, ws, "live", "crypto", null);
      const ledgerPaidTx = hex(32);
      await ledgerTx(db, ledgerPaidTx);
      const ledgerPaid = await payment(db, ws, "sandbox", "crypto", ledgerPaidTx);
      const sandboxPending = await payment(db, ws, "sandbox", "crypto", null);
      const chainTx = hex(32);
      await observe(db, "sandbox", chainTx);
      const chainPaid = await payment(db, ws, "sandbox", "crypto", chainTx);
      const card = await payment(db, ws, "live", "card", null);

      // The inbox: a sandbox ledger transfer, a sandbox chain transfer (claimed by the watcher).
      const inbox = async (environment: string, txHash: string) => {
        const row = await sql<{ id: string }>`
          INSERT INTO unmatched_transfers (workspace_id, environment, token_symbol, amount, from_address,
                                           to_address, tx_hash, log_index, block_number, reason)
          VALUES (${ws}, ${environment}, 'USDC', 5, ${ADDRESS}, ${ADDRESS}, ${txHash}, 0, 0, 'no match')
          RETURNING id`.execute(db);
        return (row.rows[0] as { id: string }).id;
      };
      const ledgerInbox = await inbox("sandbox", hex(32));
      const chainInbox = await inbox("sandbox", chainTx);

      // Transfers: live; sandbox on the ledger; sandbox with a chain transaction signed for it;
      // sandbox with a hash the ledger does not know; a sandbox one that never got a hash.
      const livePayout = await payout(db, ws, "live", hex(32));
      const ledgerMoveTx = hex(32);
      await ledgerTx(db, ledgerMoveTx);
      const ledgerPayout = await payout(db, ws, "sandbox", ledgerMoveTx);
      const signedPayout = await payout(db, ws, "sandbox", null);
      await sql`
        INSERT INTO chain_transactions (environment, from_address, nonce, purpose, payout_id, to_address,
                                        token_symbol, amount, raw_tx, tx_hash)
        VALUES ('sandbox', ${ADDRESS}, 0, 'payout', ${signedPayout}, ${ADDRESS}, 'USDC', 5, '0x00', ${hex(32)})`.execute(
        db,
      );
      const userOpPayout = await payout(db, ws, "sandbox", hex(32));
      const neverSent = await payout(db, ws, "sandbox", null);

      // A swap is its transfer's network; a quote, its route's venue.
      const swapOf = async (transfer: string) => {
        await sql`
          INSERT INTO swaps (id, workspace_id, environment, sell_token, buy_token, side, quoted_sell_amount,
                             quoted_buy_amount, min_buy_amount, max_sell_amount, slippage_bps, route, created_at)
          VALUES (${transfer}, ${ws}, 'sandbox', 'USDC', 'ETH', 'exact_in', 5, 5, 5, 5, 50, '[]', now())`.execute(
          db,
        );
      };
      await swapOf(ledgerPayout);
      await swapOf(userOpPayout);
      const quote = async (environment: string, protocol: string) => {
        const id = randomUUID();
        await sql`
          INSERT INTO swap_quotes (id, workspace_id, environment, sell_token, buy_token, side, sell_amount,
                                   buy_amount, min_buy_amount, max_sell_amount, slippage_bps,
                                   price_impact_bps, wallet_type, from_address, route, gas_estimate,
                                   expires_at)
          VALUES (${id}, ${ws}, ${environment}, 'USDC', 'ETH', 'exact_in', 5, 5, 5, 5, 50, 0, 'eoa',
                  ${ADDRESS}, ${JSON.stringify([{ protocol, pool: ADDRESS, fee: 3000 }])}::jsonb, 0, now())`.execute(
          db,
        );
        return id;
      };
      const sandboxQuote = await quote("sandbox", "sandbox-constant-product");
      const uniswapQuote = await quote("sandbox", "uniswap-v3");

      const onramp = async (provider: string) => {
        const id = randomUUID();
        await sql`
          INSERT INTO onramp_sessions (id, workspace_id, environment, provider, provider_session_id, status,
                                       wallet_type, wallet_address, destination_currency,
                                       destination_network, created_at, updated_at)
          VALUES (${id}, ${ws}, 'sandbox', ${provider}, ${id}, 'initialized', 'eoa', ${ADDRESS}, 'USDC',
                  'ethereum', now(), now())`.execute(db);
        return id;
      };
      const sandboxOnramp = await onramp("sandbox");
      const cardOnramp = await onramp("card");

      expect((await migratorUpTo(db, "033_money_record_networks").migrateToLatest()).error).toBeUndefined();

      const networks = async (table: string, ids: string[]) =>
        Promise.all(ids.map((id) => networkOf(db, table, id)));
      expect(
        await networks("payments", [live, livePending, ledgerPaid, sandboxPending, chainPaid, card]),
      ).toEqual(["default", "default", "sandbox-a", "sandbox-a", "default", null]);
      expect(await networks("unmatched_transfers", [ledgerInbox, chainInbox])).toEqual([
        "sandbox-a",
        "default",
      ]);
      expect(
        await networks("payouts", [livePayout, ledgerPayout, signedPayout, userOpPayout, neverSent]),
      ).toEqual(["default", "sandbox-a", "default", "default", "sandbox-a"]);
      expect(await networks("swaps", [ledgerPayout, userOpPayout])).toEqual(["sandbox-a", "default"]);
      expect(await networks("swap_quotes", [sandboxQuote, uniswapQuote])).toEqual(["sandbox-a", "default"]);
      expect(await networks("onramp_sessions", [sandboxOnramp, cardOnramp])).toEqual([
        "sandbox-a",
        "default",
      ]);
      const claims = await sql<{ network: string }>`SELECT DISTINCT network FROM observed_transfers`.execute(
        db,
      );
      expect(claims.rows).toEqual([{ network: "default" }]);

      // The same transfer (hash, token, recipient, ordinal) on another network is another claim …
      await sql`
        INSERT INTO observed_transfers (environment, network, tx_hash, token_symbol, to_address, ordinal,
                                        log_index, block_number, claim)
        VALUES ('live', 'base', ${liveTx}, 'USDC', ${ADDRESS.toLowerCase()}, 0, 0, 7, 'payment')`.execute(db);
      // … and on the same network, the one the key refuses.
      await expect(
        sql`
          INSERT INTO observed_transfers (environment, network, tx_hash, token_symbol, to_address, ordinal,
                                          log_index, block_number, claim)
          VALUES ('live', 'default', ${liveTx}, 'USDC', ${ADDRESS.toLowerCase()}, 0, 0, 7, 'payment')`.execute(
          db,
        ),
      ).rejects.toThrow(/observed_transfers_pkey/);
      // A writer of the version before names no network: refused, never put on a guessed one.
      await expect(payout(db, ws, "live", hex(32))).rejects.toThrow(/network/);
      await expect(observe(db, "live", hex(32))).rejects.toThrow(/network/);
    } finally {
      await close();
    }
  });

  it("034 rebuilds the payments' totals per network: card payments in the buckets of none", async () => {
    const { db, close } = await openDatabase({});
    try {
      expect((await migratorUpTo(db, "033_money_record_networks").migrateToLatest()).error).toBeUndefined();
      const ws = await workspace(db);
      const insert = (network: string | null, method: "crypto" | "card") =>
        sql`
        INSERT INTO payments (workspace_id, environment, network, status, payment_method, payment_provider,
                              token_symbol, gross_amount, fee_amount, net_amount, wallet_type, expires_at)
        VALUES (${ws}, 'live', ${network}, 'pending', ${method}, ${method === "card" ? "card" : "onchain"},
                'USDC', 5, 0, 5, 'eoa', now())`.execute(db);
      await insert("default", "crypto");
      await insert("default", "crypto");
      await insert(null, "card");
      expect((await migratorUpTo(db, "034_payment_totals_networks").migrateToLatest()).error).toBeUndefined();
      await insert("base", "crypto");
      const buckets = await sql<{ network: string | null; count: string; compacted: boolean }>`
        SELECT network, sum(count)::text AS count, bool_and(compacted) AS compacted FROM payment_totals
        GROUP BY network ORDER BY network NULLS LAST`.execute(db);
      expect(buckets.rows).toEqual([
        { network: "base", count: "1", compacted: false },
        { network: "default", count: "2", compacted: true },
        { network: null, count: "1", compacted: true },
      ]);
    } finally {
      await close();
    }
  });
});
