import { randomBytes } from "node:crypto";
import { sql } from "kysely";
import { describe, expect, it } from "vitest";
import * as sent from "../../src/chain/sent-transactions.ts";
import * as sending from "../../src/modules/transfers/sending-repo.ts";
import { openDatabase } from "../../src/platform/db/database.ts";
import { createWorkspace, startTestApp } from "../support/app.ts";
import { LIVE_DEFAULT } from "../support/devnet-env.ts";
import { migratorUpTo } from "../support/migrations.ts";
import { newPayout } from "../support/payout-rows.ts";

// The database's part in sending money once (issue 20), without a chain: a payout its sender
// claimed cannot be failed as "never sent", whichever commits first; migration 016 builds the
// unique settlement legs also over a database that holds a payment settled twice.

const hex = (bytes: number) => `0x${randomBytes(bytes).toString("hex")}`;

describe("a payout claimed for sending", () => {
  it("is not failed as never sent by a reconciler that waited for the claim's commit", async () => {
    const t = await startTestApp();
    try {
      const ws = await createWorkspace(t);
      const db = t.database.db;
      const payout = await sending.insertPayout(
        db,
        newPayout(ws, "live", { idempotencyKey: null, amount: 1n, destinationAddress: hex(20) }),
        20,
      );
      if (!payout) throw new Error("not recorded");
      let claimed!: () => void;
      const claim = new Promise<void>((resolve) => {
        claimed = resolve;
      });
      let commit!: () => void;
      const committing = new Promise<void>((resolve) => {
        commit = resolve;
      });
      // Its lease has run out (its sender was stopped): the reconciler may look at it.
      const past = new Date(Date.now() - 60_000);
      await db.updateTable("payouts").set({ lease_expires_at: past }).where("id", "=", payout.id).execute();
      // The sender resumes, claims the payout and records its transaction (one statement, here in
      // a transaction that stands still before its commit for longer than the lease again: the
      // new lease is put in the past).
      const sender = db.transaction().execute(async (trx) => {
        const recorded = await sent.recordClaimed(
          trx,
          LIVE_DEFAULT,
          [
            {
              txHash: hex(32) as `0x${string}`,
              raw: "0x00",
              nonce: 0,
              token: "USDC",
              purpose: "payout",
              replaces: null,
              from: ws.eoaAddress as `0x${string}`,
              to: hex(20) as `0x${string}`,
              amount: 1n,
              paymentId: null,
              payoutId: payout.id,
            },
          ],
          sending.claimForSending(payout.id, 20),
        );
        expect(recorded).toBe(true);
        await trx
          .updateTable("payouts")
          .set({ lease_expires_at: past })
          .where("id", "=", payout.id)
          .execute();
        claimed();
        await committing;
      });
      await claim;
      // The reconciler (another connection on PostgreSQL) finds the payout unleased, with nothing
      // recorded in its snapshot, and waits for the sender's row lock; then the sender commits.
      const failing = sending.failNeverSent(db, payout.id, "not sent", new Date());
      setTimeout(commit, 200);
      await sender;
      expect(await failing).toBeUndefined();
      const row = await db
        .selectFrom("payouts")
        .select("status")
        .where("id", "=", payout.id)
        .executeTakeFirst();
      expect(row?.status).toBe("processing");
    } finally {
      await t.close();
    }
  });
});

describe("a wallet's nonce", () => {
  it("is held by one primary transaction; a second one at it is told apart as 'nonce taken'", async () => {
    const t = await startTestApp();
    try {
      const tx = (hash: string): sent.NewTransaction => ({
        txHash: hash as `0x${string}`,
        raw: "0x00",
        nonce: 7,
        token: "ETH",
        purpose: "payout",
        replaces: null,
        from: "0x1111111111111111111111111111111111111111",
        to: "0x2222222222222222222222222222222222222222",
        amount: 1n,
        paymentId: null,
        payoutId: null,
      });
      await sent.recordTransaction(t.database.db, LIVE_DEFAULT, tx(hex(32)));
      const second = await sent.recordTransaction(t.database.db, LIVE_DEFAULT, tx(hex(32))).then(
        () => undefined,
        (err: unknown) => err,
      );
      expect(sent.isNonceTaken(second)).toBe(true);
      expect(sent.isNonceTaken(new Error("another failure"))).toBe(false);
    } finally {
      await t.close();
    }
  });
});

describe("migration 016", () => {
  it("keeps a payment's first settlement legs and marks the later ones, then makes legs unique", async () => {
    const { db, close } = await openDatabase({});
    try {
      const migrator = (upTo: string) => migratorUpTo(db, upTo);
      expect((await migrator("015_master_key_check").migrateToLatest()).error).toBeUndefined();
      // A payment settled twice before the upgrade (the fault issue 20 fixes): two net legs.
      const [first, second] = [hex(32), hex(32)];
      await sql`
        WITH ws AS (INSERT INTO workspaces (name) VALUES ('before the upgrade') RETURNING id),
        paid AS (
          INSERT INTO payments (workspace_id, environment, status, payment_method, payment_provider,
                                token_symbol, gross_amount, fee_amount, net_amount, wallet_type, expires_at)
          SELECT id, 'live', 'forwarded', 'crypto', 'onchain', 'USDC', 5, 0, 5, 'eoa', now() FROM ws
          RETURNING id
        )
        INSERT INTO chain_transactions (environment, from_address, nonce, purpose, payment_id, to_address,
                                        token_symbol, amount, raw_tx, tx_hash, status, created_at)
        SELECT 'live', '0xwallet', n, 'settlement_net', paid.id, '0xmerchant', 'USDC', 5, '0x00', h, 'mined',
               now() + make_interval(secs => n)
        FROM paid, (VALUES (0, ${first}::text), (1, ${second}::text)) AS legs(n, h)
      `.execute(db);

      expect((await migrator("016_one_payer_per_nonce").migrateToLatest()).error).toBeUndefined();
      const legs = await db
        .selectFrom("chain_transactions")
        .select(["tx_hash", "purpose"])
        .orderBy("nonce")
        .execute();
      expect(legs).toEqual([
        { tx_hash: first, purpose: "settlement_net" },
        { tx_hash: second, purpose: "settlement_net_duplicate" },
      ]);
    } finally {
      await close();
    }
  });
});
