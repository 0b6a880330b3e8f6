import { randomBytes } from "node:crypto";
import { sql } from "kysely";
import { describe, expect, it } from "vitest";
import { openDatabase } from "../../src/platform/db/database.ts";
import { migratorUpTo } from "../support/migrations.ts";

// Migration 026 on a database with history: every claim the watcher made before says what its
// transfer counts as (issue 36, item 1), read from what holds the transfer today, and the schema
// takes no other meaning.

const hex = (bytes: number) => `0x${randomBytes(bytes).toString("hex")}`;
const WALLET = `0x${"Ab".repeat(20)}`;
const PAYER = `0x${"Cd".repeat(20)}`;

describe("migration 026 on a database with history", () => {
  it("classifies each claim as a payment's, an on-ramp session's or the inbox's", async () => {
    const { db, close } = await openDatabase({});
    try {
      const migrator = (upTo: string) => migratorUpTo(db, upTo);
      expect((await migrator("025_onramp_reconcile").migrateToLatest()).error).toBeUndefined();
      const [detected, attached, delivered, open] = [hex(32), hex(32), hex(32), hex(32)];
      await sql`
        WITH ws AS (INSERT INTO workspaces (name) VALUES ('before the upgrade') RETURNING id),
        paid AS (
          INSERT INTO payments (workspace_id, environment, status, payment_method, payment_provider,
                                token_symbol, gross_amount, fee_amount, net_amount, wallet_type,
                                receiving_address, expires_at, detected_tx_hash, detected_log_index,
                                detected_block)
          SELECT id, 'live', 'forwarded', 'crypto', 'onchain', 'USDC', 5, 0, 5, 'eoa', ${WALLET}, now(),
                 tx, 1, 17
          FROM ws, (VALUES (${detected}), (${attached})) AS v(tx)
        )
        INSERT INTO unmatched_transfers (workspace_id, environment, token_symbol, amount, from_address,
                                         to_address, tx_hash, log_index, block_number, reason, status)
        SELECT id, 'live', 'USDC', 5, ${PAYER}, ${WALLET}, tx, 1, 17, 'no match', status
        FROM ws, (VALUES (${attached}, 'attached'), (${delivered}, 'onramp'), (${open}, 'open')) AS v(tx, status)
      `.execute(db);
      await sql`
        INSERT INTO observed_transfers (environment, tx_hash, token_symbol, to_address, ordinal, log_index, block_number)
        SELECT 'live', tx, 'USDC', ${WALLET.toLowerCase()}, 0, 1, 17
        FROM (VALUES (${detected}), (${attached}), (${delivered}), (${open})) AS v(tx)
      `.execute(db);

      expect((await migrator("026_transfer_claims").migrateToLatest()).error).toBeUndefined();
      const claims = await sql<{ tx_hash: string; claim: string }>`
        SELECT tx_hash, claim FROM observed_transfers`.execute(db);
      expect(new Map(claims.rows.map((r) => [r.tx_hash, r.claim]))).toEqual(
        new Map([
          [detected, "payment"],
          [attached, "payment"],
          [delivered, "onramp"],
          [open, "inbox"],
        ]),
      );
      // Every writer says what it claims, and only the three meanings exist.
      await expect(
        sql`INSERT INTO observed_transfers (environment, tx_hash, token_symbol, to_address, ordinal, log_index, block_number)
            VALUES ('live', ${hex(32)}, 'USDC', ${WALLET.toLowerCase()}, 0, 1, 18)`.execute(db),
      ).rejects.toThrow(/claim/);
      await expect(
        sql`INSERT INTO observed_transfers (environment, tx_hash, token_symbol, to_address, ordinal, log_index, block_number, claim)
            VALUES ('live', ${hex(32)}, 'USDC', ${WALLET.toLowerCase()}, 0, 1, 18, 'both')`.execute(db),
      ).rejects.toThrow(/observed_transfers_claim_check/);
      // One claim per transfer: the same transfer cannot be claimed a second time, with any meaning.
      await expect(
        sql`INSERT INTO observed_transfers (environment, tx_hash, token_symbol, to_address, ordinal, log_index, block_number, claim)
            VALUES ('live', ${detected}, 'USDC', ${WALLET.toLowerCase()}, 0, 5, 18, 'onramp')`.execute(db),
      ).rejects.toThrow(/duplicate key/);
    } finally {
      await close();
    }
  });
});
