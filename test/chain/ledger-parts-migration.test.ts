import { sql } from "kysely";
import { describe, expect, it } from "vitest";
import { openDatabase } from "../../src/platform/db/database.ts";
import { migratorUpTo } from "../support/migrations.ts";

// Migration 047 on a ledger with history: every wallet's parts start as the sum of its entries,
// and a writer of the previous release (which inserts entries only) keeps them whole.

const A = `0x${"a1".repeat(20)}`;
const B = `0x${"b2".repeat(20)}`;
let hash = 0;
const txHash = () => `0x${(hash++).toString(16).padStart(64, "0")}`;

describe("migration 047 on a ledger with history", () => {
  it("sums each wallet's entries into its parts; later entries, however written, add theirs", async () => {
    const { db, close } = await openDatabase({});
    try {
      expect((await migratorUpTo(db, "046_webhook_probe").migrateToLatest()).error).toBeUndefined();
      const entry = (network: string, address: string, token: string, amount: number) =>
        sql`INSERT INTO ledger_entries (network, address, token_symbol, amount, tx_hash)
            VALUES (${network}, ${address}, ${token}, ${amount}, ${txHash()})`.execute(db);
      await entry("sandbox-a", A, "USDC", 100);
      await entry("sandbox-a", A, "USDC", -30);
      await entry("sandbox-b", A, "USDC", 7);
      await entry("sandbox-a", A, "ETH", 5);
      await entry("sandbox-a", B, "USDC", 30);

      expect((await migratorUpTo(db, "047_ledger_balance_parts").migrateToLatest()).error).toBeUndefined();
      const parts = async () =>
        (
          await sql<{ network: string; address: string; token_symbol: string; sum: string }>`
            SELECT network, address, token_symbol, sum(amount)::text AS sum FROM ledger_balance_parts
            GROUP BY 1, 2, 3 ORDER BY 1, 2, 3`.execute(db)
        ).rows;
      expect(await parts()).toEqual([
        { network: "sandbox-a", address: A, token_symbol: "ETH", sum: "5" },
        { network: "sandbox-a", address: A, token_symbol: "USDC", sum: "70" },
        { network: "sandbox-a", address: B, token_symbol: "USDC", sum: "30" },
        { network: "sandbox-b", address: A, token_symbol: "USDC", sum: "7" },
      ]);

      // The previous release's writes: an entry alone, and one statement inserting entries twice.
      await entry("sandbox-a", B, "USDC", 12);
      await sql`
        WITH one AS (
          INSERT INTO ledger_entries (network, address, token_symbol, amount, tx_hash)
          VALUES ('sandbox-a', ${A}, 'USDC', -20, ${txHash()}), ('sandbox-a', ${B}, 'USDC', 20, ${txHash()})
        ), two AS (
          INSERT INTO ledger_entries (network, address, token_symbol, amount, tx_hash)
          VALUES ('sandbox-a', ${A}, 'USDC', 1, ${txHash()})
        ) SELECT 1`.execute(db);
      const entries = (
        await sql<{ network: string; address: string; token_symbol: string; sum: string }>`
          SELECT network, address, token_symbol, sum(amount)::text AS sum FROM ledger_entries
          GROUP BY 1, 2, 3 ORDER BY 1, 2, 3`.execute(db)
      ).rows;
      expect(await parts()).toEqual(entries);
      expect(
        entries.find((e) => e.address === A && e.token_symbol === "USDC" && e.network === "sandbox-a")?.sum,
      ).toBe("51");
      // Both releases' debit checks read the parts: sandbox-a's money only for the old one.
      const debit = await sql<{ now: string; old: string }>`
        SELECT ledger_debit_balance('sandbox-a', ${B}, 'USDC')::text AS now,
               ledger_debit_balance(${A}, 'USDC')::text AS old`.execute(db);
      expect(debit.rows[0]).toEqual({ now: "62", old: "51" });
    } finally {
      await close();
    }
  });
});
