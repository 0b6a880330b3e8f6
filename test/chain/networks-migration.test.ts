import { randomBytes } from "node:crypto";
import { sql } from "kysely";
import { describe, expect, it } from "vitest";
import { openDatabase } from "../../src/platform/db/database.ts";
import { migratorUpTo } from "../support/migrations.ts";

// Migrations 031 and 032 on a database with history: every transaction recorded before was signed
// for the one network its environment had (`default`, D22), and a nonce is unique per network from
// then on (the EOA, one address on every EVM chain, counts its nonces per chain); the watcher's
// cursor of before is that network's, and each network keeps its own.

const hex = (bytes: number) => `0x${randomBytes(bytes).toString("hex")}`;
const EOA = `0x${"Ab".repeat(20)}`;

describe("migration 031 on a database with history", () => {
  it("puts earlier transactions on `default`; a nonce is then taken once per network", async () => {
    const { db, close } = await openDatabase({});
    try {
      const migrator = (upTo: string) => migratorUpTo(db, upTo);
      expect((await migrator("030_settlement_transfers").migrateToLatest()).error).toBeUndefined();
      const insert = (network: string | null, nonce: number) =>
        sql`
        INSERT INTO chain_transactions (environment, ${network === null ? sql`` : sql`network,`} from_address, nonce,
                                        purpose, to_address, token_symbol, amount, raw_tx, tx_hash)
        VALUES ('live', ${network === null ? sql`` : sql`${network},`} ${EOA}, ${nonce}, 'payout', ${EOA}, 'ETH', 1,
                '0x00', ${hex(32)})`.execute(db);
      await insert(null, 0);
      await insert(null, 1);

      expect((await migrator("031_chain_transaction_networks").migrateToLatest()).error).toBeUndefined();
      const rows = await sql<{ network: string; nonce: string }>`
        SELECT network, nonce::text FROM chain_transactions ORDER BY nonce`.execute(db);
      expect(rows.rows).toEqual([
        { network: "default", nonce: "0" },
        { network: "default", nonce: "1" },
      ]);
      // The same wallet's nonce 0 on another network is another transaction; on `default` again,
      // the one the index refuses.
      await insert("base", 0);
      await expect(insert("default", 0)).rejects.toThrow(/chain_transactions_nonce/);
      // A writer of the version before names none: its transactions are the one network it knows.
      await insert(null, 2);
      const last = await sql<{
        network: string;
      }>`SELECT network FROM chain_transactions WHERE nonce = 2`.execute(db);
      expect(last.rows).toEqual([{ network: "default" }]);
    } finally {
      await close();
    }
  });

  it("032 keeps the cursor of before as `default`'s; each network then has its own, and a writer names its network", async () => {
    const { db, close } = await openDatabase({});
    try {
      expect(
        (await migratorUpTo(db, "031_chain_transaction_networks").migrateToLatest()).error,
      ).toBeUndefined();
      await sql`INSERT INTO chain_cursors (environment, block_number, block_hash) VALUES ('live', 17, '0xaa')`.execute(
        db,
      );
      expect((await migratorUpTo(db, "032_chain_cursor_networks").migrateToLatest()).error).toBeUndefined();
      await sql`INSERT INTO chain_cursors (environment, network, block_number, block_hash)
                VALUES ('live', 'base', 5, '0xbb')`.execute(db);
      const cursors = await sql<{ network: string; block_number: string }>`
        SELECT network, block_number::text FROM chain_cursors ORDER BY network`.execute(db);
      expect(cursors.rows).toEqual([
        { network: "base", block_number: "5" },
        { network: "default", block_number: "17" },
      ]);
      await expect(
        sql`INSERT INTO chain_cursors (environment, block_number, block_hash) VALUES ('live', 1, '0xcc')`.execute(
          db,
        ),
      ).rejects.toThrow(/network/);
    } finally {
      await close();
    }
  });
});
