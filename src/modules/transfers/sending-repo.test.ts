import { randomBytes } from "node:crypto";
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Database, migrate, openDatabase } from "../../platform/db/database.ts";
import { committedFrom } from "./sending-repo.ts";

// What is on its way out of a wallet is counted per network (D22): the workspace EOA has one
// address on every EVM chain, and a payout processing on one chain takes nothing from its balance
// on another.

const hex = (bytes: number) => `0x${randomBytes(bytes).toString("hex")}`;
const WALLET = `0x${"Cd".repeat(20)}`;
const LIVE = { environment: "live" as const, id: "default" };
const BASE = { environment: "live" as const, id: "base" };

let database: Database;
let workspace: string;

beforeAll(async () => {
  database = await openDatabase({});
  await migrate(database.db);
  const ws = await sql<{
    id: string;
  }>`INSERT INTO workspaces (name) VALUES ('two networks') RETURNING id`.execute(database.db);
  workspace = (ws.rows[0] as { id: string }).id;
});
afterAll(() => database?.close());

async function processing(network: string, amount: number): Promise<void> {
  await sql`
    INSERT INTO payouts (workspace_id, environment, network, status, token_symbol, amount,
                         destination_address, from_address, wallet_type)
    VALUES (${workspace}, 'live', ${network}, 'processing', 'USDC', ${amount}, ${hex(20)}, ${WALLET}, 'eoa')`.execute(
    database.db,
  );
}

describe("committedFrom", () => {
  it("counts the processing payouts of the wallet on the network asked about, not another's", async () => {
    await processing("default", 5);
    await processing("default", 7);
    await processing("base", 100);
    for (const minedNonce of [null, 0]) {
      const onDefault = await committedFrom(database.db, LIVE, WALLET, minedNonce);
      expect(onDefault.get("USDC")).toMatchObject({ amount: 12n, transactions: 2 });
      const onBase = await committedFrom(database.db, BASE, WALLET, minedNonce);
      expect(onBase.get("USDC")).toMatchObject({ amount: 100n, transactions: 1 });
      const elsewhere = await committedFrom(
        database.db,
        { environment: "live", id: "polygon" },
        WALLET,
        minedNonce,
      );
      expect(elsewhere.size).toBe(0);
    }
  });
});
