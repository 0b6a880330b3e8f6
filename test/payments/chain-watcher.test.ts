import { randomUUID } from "node:crypto";
import { sql } from "kysely";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { Hex, IncomingTransfer } from "../../src/chain/network.ts";
import { inChainOrder, transferOrdinals } from "../../src/chain/transfer-order.ts";
import { matchTransfers } from "../../src/modules/payments/incoming/chain-repo.ts";
import {
  ChainWatcher,
  followTime,
  planConfirmations,
} from "../../src/modules/payments/incoming/chain-watcher.ts";
import * as repo from "../../src/modules/payments/repo.ts";
import { batchTransition } from "../../src/modules/payments/transitions.ts";
import { openDatabase } from "../../src/platform/db/database.ts";
import type { PaymentRow } from "../../src/platform/db/schema.ts";
import { createWorkspace, startTestApp, type TestApp } from "../support/app.ts";
import { LIVE_DEFAULT } from "../support/devnet-env.ts";
import { LATEST, migratorUpTo } from "../support/migrations.ts";
import { hex, PAYER, type ScriptedBlock, ScriptedChain } from "../support/scripted-chain.ts";

// The chain watcher's set-based matching (D5) against a scripted chain: each test writes the
// blocks it needs (including repeats and reorgs) and checks what the database holds afterwards.
// The devnet suites (crypto-payments) cover the same watcher against a real node.

const USDC = (units: number) => BigInt(units) * 1_000_000n;

describe("chain watcher: set-based matching", () => {
  let t: TestApp;
  let chain: ScriptedChain;
  let address: string;
  let workspaceId: string;
  /** Creation times one second apart, so "oldest" is unambiguous and follows insertion order. */
  let created = Date.now() - 3_600_000;

  beforeAll(async () => {
    t = await startTestApp();
  });

  afterAll(async () => {
    await t?.close();
  });

  beforeEach(async () => {
    // Each test has its own chain (the cursor starts over) and its own workspace (address).
    await t.database.db.deleteFrom("chain_cursors").execute();
    chain = new ScriptedChain();
    const ws = await createWorkspace(t);
    workspaceId = ws.id;
    // Checksummed: matching must not depend on the address's letter case.
    address = ws.eoaAddress;
  });

  /** No job interval: a tick scans once and does not follow the head (followTime). */
  const watcher = () => new ChainWatcher(t.database.db, chain, t.app.ctx.log, () => new Date());

  async function pending(
    amount: bigint,
    options: { to?: string; token?: "USDC" | "ETH"; expiresAt?: Date } = {},
  ): Promise<string> {
    created += 1_000;
    const row = repo.newPaymentRow({
      id: randomUUID(),
      status: "pending",
      workspaceId,
      environment: "live",
      network: LIVE_DEFAULT.id,
      paymentMethod: "crypto",
      paymentProvider: "onchain",
      tokenSymbol: options.token ?? "USDC",
      gross: amount,
      fee: 0n,
      net: amount,
      merchantWallet: "0x2222222222222222222222222222222222222222",
      walletType: "eoa",
      receivingAddress: options.to ?? address,
      description: null,
      metadata: {},
      returnUrl: null,
      cancelUrl: null,
      expiresAt: options.expiresAt ?? new Date(Date.now() + 3_600_000),
      createdAt: new Date(created),
    });
    await repo.insertPaymentsQuery([row]).execute(t.database.db);
    return row.id;
  }

  const payment = (id: string) =>
    t.database.db.selectFrom("payments").selectAll().where("id", "=", id).executeTakeFirstOrThrow();

  const unmatched = () =>
    t.database.db
      .selectFrom("unmatched_transfers")
      .select(["tx_hash", "amount", "workspace_id"])
      .where("workspace_id", "=", workspaceId)
      .orderBy("block_number")
      .orderBy("log_index")
      .execute();

  const events = (type: string) =>
    t.database.db
      .selectFrom("outbox_events")
      .select(["payload"])
      .where("workspace_id", "=", workspaceId)
      .where("event_type", "=", type)
      .orderBy("id")
      .execute()
      .then((rows) => rows.map((r) => r.payload as Record<string, unknown>));

  /** The first tick only sets the cursor at the head; later blocks are then scanned. */
  async function started(): Promise<ChainWatcher> {
    const w = watcher();
    await w.tick();
    return w;
  }

  it("two transfers of one amount to one address detect the two oldest payments, in order", async () => {
    const w = await started();
    const first = await pending(USDC(10));
    const second = await pending(USDC(10));
    const third = await pending(USDC(10));
    const [a, b] = chain.mine([
      { to: address, amount: USDC(10) },
      { to: address, amount: USDC(10) },
    ]);
    await w.tick();

    const [p1, p2, p3] = await Promise.all([payment(first), payment(second), payment(third)]);
    expect([p1.status, p2.status, p3.status]).toEqual(["detected", "detected", "pending"]);
    expect(p1.detected_tx_hash).toBe(a?.txHash);
    expect(p2.detected_tx_hash).toBe(b?.txHash);
    expect(p1.payer_address).toBe(PAYER);
    expect(await unmatched()).toEqual([]);
    const detected = await events("payment.detected");
    expect(detected.map((e) => [e.id, e.status, e.txHash])).toEqual([
      [first, "detected", a?.txHash],
      [second, "detected", b?.txHash],
    ]);
  });

  it("more transfers than payments: the oldest payments are detected, the extra transfers unmatched", async () => {
    const w = await started();
    const older = await pending(USDC(5));
    const newer = await pending(USDC(5));
    const other = await pending(USDC(6));
    const mined = chain.mine([
      { to: address, amount: USDC(5) },
      { to: address, amount: USDC(6) },
      { to: address, amount: USDC(5) },
    ]);
    const late = chain.mine([
      { to: address, amount: USDC(5) },
      { to: address, amount: USDC(7) },
    ]);
    await w.tick();

    expect((await payment(older)).detected_tx_hash).toBe(mined[0]?.txHash);
    expect((await payment(other)).detected_tx_hash).toBe(mined[1]?.txHash);
    expect((await payment(newer)).detected_tx_hash).toBe(mined[2]?.txHash);
    expect(await unmatched()).toEqual([
      { tx_hash: late[0]?.txHash, amount: USDC(5).toString(), workspace_id: workspaceId },
      { tx_hash: late[1]?.txHash, amount: USDC(7).toString(), workspace_id: workspaceId },
    ]);
    expect(await events("payment.detected")).toHaveLength(3);
  });

  it("matches only on the same token, amount and receiving address", async () => {
    const w = await started();
    const other = await createWorkspace(t);
    const usdc = await pending(USDC(3));
    const eth = await pending(USDC(3), { token: "ETH" });
    const elsewhere = await pending(USDC(4), { to: other.eoaAddress });
    const [toEth, toOther] = chain.mine([
      { to: address.toLowerCase(), amount: USDC(3), token: "ETH" },
      { to: address, amount: USDC(4) },
    ]);
    await w.tick();

    expect((await payment(eth)).detected_tx_hash).toBe(toEth?.txHash);
    expect((await payment(usdc)).status).toBe("pending");
    expect((await payment(elsewhere)).status).toBe("pending");
    expect((await unmatched()).map((u) => u.tx_hash)).toEqual([toOther?.txHash]);
  });

  it("a transfer seen again (a repeated log, a rescan after a restart) counts once", async () => {
    const w = await started();
    const id = await pending(USDC(8));
    const [paid] = chain.mine([{ to: address, amount: USDC(8) }]);
    const [stray] = chain.mine([{ to: address, amount: USDC(9) }]);
    if (!paid || !stray) throw new Error("not mined");
    // The node returns both logs twice in this range and again in every later one.
    chain.repeated = [paid, stray];
    await w.tick();
    chain.mine([]);
    await w.tick();
    // A restart from a cursor written before both blocks: the new instance scans them again.
    await t.database.db
      .updateTable("chain_cursors")
      .set({ block_number: "0", block_hash: chain.blocks[0]?.hash as string })
      .execute();
    await watcher().tick();

    expect((await payment(id)).detected_tx_hash).toBe(paid.txHash);
    expect((await unmatched()).map((u) => u.tx_hash)).toEqual([stray.txHash]);
    expect(await events("payment.detected")).toHaveLength(1);
    const claims = await t.database.db
      .selectFrom("observed_transfers")
      .select("tx_hash")
      .where("tx_hash", "in", [paid.txHash, stray.txHash])
      .execute();
    expect(claims).toHaveLength(2);
  });

  it("two instances scanning the same blocks at once apply each transfer once", async () => {
    const first = await started();
    const second = watcher();
    const ids = [await pending(USDC(2)), await pending(USDC(2)), await pending(USDC(2))];
    chain.mine([
      { to: address, amount: USDC(2) },
      { to: address, amount: USDC(2) },
    ]);
    await Promise.all([first.tick(), second.tick()]);

    const rows = await Promise.all(ids.map(payment));
    const detected = rows.filter((p) => p.status === "detected");
    expect(detected).toHaveLength(2);
    expect(new Set(detected.map((p) => p.detected_tx_hash)).size).toBe(2);
    expect(await unmatched()).toEqual([]);
    expect(await events("payment.detected")).toHaveLength(2);
  });

  describe("claims across transactions", () => {
    const DETECT = batchTransition("transfer_detected");
    const match = (transfers: IncomingTransfer[]) => (trx: typeof t.database.db) =>
      matchTransfers(
        trx,
        LIVE_DEFAULT,
        transfers.map((x, i) => ({ ...x, workspaceId, ordinal: transferOrdinals(transfers)[i] ?? 0 })),
        DETECT,
        new Date(),
        "unmatched",
      );

    /**
     * Runs `second` while `first`'s transaction is still open (PostgreSQL: concurrently, it
     * waits where it must; PGlite runs one transaction at a time, so it runs after the commit).
     */
    async function overlapping<A, B>(
      first: (trx: typeof t.database.db) => Promise<A>,
      second: (trx: typeof t.database.db) => Promise<B>,
    ): Promise<[A, B]> {
      let done!: () => void;
      const commit = new Promise<void>((resolve) => {
        done = resolve;
      });
      let ran!: () => void;
      const firstRan = new Promise<void>((resolve) => {
        ran = resolve;
      });
      const a = t.database.db.transaction().execute(async (trx) => {
        const result = await first(trx);
        ran();
        await commit;
        return result;
      });
      await firstRan;
      const b = t.database.db.transaction().execute(second);
      await new Promise((resolve) => setTimeout(resolve, 100));
      done();
      return Promise.all([a, b]);
    }

    it("a transfer another transaction is applying is skipped, not recorded unmatched", async () => {
      const id = await pending(USDC(50));
      const mined = chain.mine([{ to: address, amount: USDC(50) }]);
      const [a, b] = await overlapping(match(mined), match(mined));
      expect(a.map((r) => r.payment?.id)).toEqual([id]);
      expect(b).toEqual([]);
      expect(await unmatched()).toEqual([]);
      expect((await payment(id)).detected_tx_hash).toBe(mined[0]?.txHash);
    });

    it("a payment another transaction holds is not matched twice: the second transfer is unmatched", async () => {
      const id = await pending(USDC(51));
      const [one, two] = chain.mine([
        { to: address, amount: USDC(51) },
        { to: address, amount: USDC(51) },
      ]);
      if (!one || !two) throw new Error("not mined");
      const [a, b] = await overlapping(match([one]), match([two]));
      expect(a.map((r) => r.payment?.id)).toEqual([id]);
      expect(b).toEqual([{ index: 0, payment: null }]);
      expect((await unmatched()).map((u) => u.tx_hash)).toEqual([two.txHash]);
      expect((await payment(id)).detected_tx_hash).toBe(one.txHash);
    });
  });

  it("transfers to expired and cancelled payments are unmatched, the payments unchanged", async () => {
    const w = await started();
    const expired = await pending(USDC(11), { expiresAt: new Date(Date.now() - 1_000) });
    const cancelled = await pending(USDC(12));
    await t.database.db
      .updateTable("payments")
      .set({ status: "cancelled" })
      .where("id", "=", cancelled)
      .execute();
    const mined = chain.mine([
      { to: address, amount: USDC(11) },
      { to: address, amount: USDC(12) },
    ]);
    await w.tick();

    expect((await payment(expired)).status).toBe("pending");
    expect((await payment(cancelled)).status).toBe("cancelled");
    expect((await unmatched()).map((u) => u.tx_hash)).toEqual(mined.map((m) => m.txHash));
    expect(await events("payment.detected")).toEqual([]);
  });

  it("confirms in one statement with payment.confirmed each, and records a re-included transfer's block", async () => {
    const w = await started();
    const ids = [await pending(USDC(21)), await pending(USDC(22)), await pending(USDC(23))];
    const early = chain.mine([
      { to: address, amount: USDC(21) },
      { to: address, amount: USDC(22) },
    ]);
    chain.mine([]);
    const [late] = chain.mine([{ to: address, amount: USDC(23) }]);
    await w.tick(); // detects all three; the first two have 3 confirmations already
    let rows = await Promise.all(ids.map(payment));
    expect(rows.map((p) => p.status)).toEqual(["confirmed", "confirmed", "detected"]);
    expect((await events("payment.confirmed")).map((e) => [e.id, e.status])).toEqual([
      [ids[0], "confirmed"],
      [ids[1], "confirmed"],
    ]);
    expect(rows[0]?.detected_tx_hash).toBe(early[0]?.txHash);

    // A one-block reorg puts the third transfer into a later block: still detected, new block.
    if (!late) throw new Error("not mined");
    chain.reorg(1);
    const moved = chain.include([late]);
    await w.tick();
    rows = await Promise.all(ids.map(payment));
    expect(rows[2]?.status).toBe("detected");
    expect(rows[2]?.detected_block_hash).toBe(moved.hash);
    expect(String(rows[2]?.detected_block)).toBe(moved.number.toString());

    chain.mine([]);
    chain.mine([]);
    await w.tick();
    expect((await payment(ids[2] as string)).status).toBe("confirmed");
    expect(await events("payment.confirmed")).toHaveLength(3);
  });

  it("a reorg that drops the detecting transfer moves the payment back; mined again, it is detected again", async () => {
    const w = await started();
    const id = await pending(USDC(30));
    const [paid] = chain.mine([{ to: address, amount: USDC(30) }]);
    if (!paid) throw new Error("not mined");
    await w.tick();
    expect((await payment(id)).status).toBe("detected");

    chain.reorg(1);
    await w.tick();
    const back = await payment(id);
    expect(back.status).toBe("pending");
    expect(back.detected_tx_hash).toBeNull();
    expect(back.detected_at).toBeNull();

    const again = chain.include([paid]);
    await w.tick();
    expect((await payment(id)).detected_block_hash).toBe(again.hash);
    expect(await events("payment.detected")).toHaveLength(2);
    expect(await unmatched()).toEqual([]);
  });

  it("a reorg that re-includes a detecting transaction at another log index does not count it again", async () => {
    const w = await started();
    // Two pending payments of the same amount: a transfer counted twice would detect both.
    const first = await pending(USDC(31));
    const second = await pending(USDC(31));
    const [paid, stray] = chain.mine([
      { to: address, amount: USDC(31) },
      { to: address, amount: USDC(32) },
    ]);
    if (!paid || !stray) throw new Error("not mined");
    await w.tick();
    expect((await payment(first)).status).toBe("detected");
    expect((await unmatched()).map((u) => u.tx_hash)).toEqual([stray.txHash]);

    // The reorg puts both transactions into a later block behind another transaction's logs.
    chain.reorg(1);
    const moved = chain.include([
      { ...stray, logIndex: 4 },
      { ...paid, logIndex: 7 },
    ]);
    await w.tick();

    const detected = await payment(first);
    expect(detected.status).toBe("detected");
    expect(detected.detected_block_hash).toBe(moved.hash);
    expect((await payment(second)).status).toBe("pending");
    expect(await events("payment.detected")).toHaveLength(1);
    expect((await unmatched()).map((u) => u.tx_hash)).toEqual([stray.txHash]);

    chain.mine([]);
    chain.mine([]);
    await w.tick();
    expect((await payment(first)).status).toBe("confirmed");
    expect((await payment(second)).status).toBe("pending");
  });

  it("two transfers of one transaction to one address count as two, and once each after a reorg", async () => {
    const w = await started();
    const ids = [await pending(USDC(33)), await pending(USDC(33)), await pending(USDC(33))];
    const txHash = hex(32);
    const [a, b] = chain.mine([
      { to: address, amount: USDC(33) },
      { to: address, amount: USDC(33) },
    ]);
    if (!a || !b) throw new Error("not mined");
    // One transaction (a batch payment) with two Transfer logs to the same address.
    const block = chain.blocks.at(-1) as ScriptedBlock;
    block.transfers = [
      { ...a, txHash },
      { ...b, txHash },
    ];
    await w.tick();
    expect((await Promise.all(ids.map(payment))).map((p) => p.status)).toEqual([
      "detected",
      "detected",
      "pending",
    ]);

    chain.reorg(1);
    chain.include([
      { ...a, txHash, logIndex: 10 },
      { ...b, txHash, logIndex: 11 },
    ]);
    await w.tick();
    expect((await Promise.all(ids.map(payment))).map((p) => p.status)).toEqual([
      "detected",
      "detected",
      "pending",
    ]);
    expect(await events("payment.detected")).toHaveLength(2);
    expect(await unmatched()).toEqual([]);
  });

  it("follows the head during a tick: a block mined mid-tick is detected before the tick ends", async () => {
    // A watcher ticked by a job every 800 ms: each tick follows the head for 700 ms.
    const w = new ChainWatcher(t.database.db, chain, t.app.ctx.log, () => new Date(), {
      pollIntervalMs: 800,
    });
    await w.tick();
    const id = await pending(USDC(40));
    const ticking = w.tick();
    // A fixed wait on purpose: the block is mined while the tick is already under way (it shows
    // nowhere to poll), 100 ms into an 800 ms interval.
    await new Promise((r) => setTimeout(r, 100));
    chain.mine([{ to: address, amount: USDC(40) }]);
    const minedAt = Date.now();
    await ticking;
    const row = await payment(id);
    expect(row.status).toBe("detected");
    // Seen at the tick's next head read (every 250 ms), not at the next tick.
    expect((row.detected_at as Date).getTime() - minedAt).toBeLessThan(400);
  });
});

describe("chain watcher: pure steps", () => {
  const transfer = (blockNumber: bigint, logIndex: number, txHash: Hex = hex(32)): IncomingTransfer => ({
    token: "USDC",
    from: PAYER,
    to: PAYER,
    amount: 1n,
    txHash,
    logIndex,
    blockNumber,
    blockHash: "0x00",
  });

  it("orders transfers by block then log index (native first), each once", () => {
    const a = transfer(2n, 3);
    const b = transfer(1n, 7);
    const eth = transfer(2n, -1);
    const c = transfer(2n, 0);
    expect(inChainOrder([a, b, eth, c, { ...a }, b])).toEqual([b, eth, c, a]);
  });

  it("numbers each transaction's transfers per token and recipient, from 0", () => {
    const tx = hex(32);
    const other = hex(32);
    const at = (logIndex: number, to: Hex, token: "USDC" | "ADAO" = "USDC", txHash = tx) => ({
      ...transfer(1n, logIndex, txHash),
      to,
      token,
    });
    const [x, y] = [hex(20), hex(20)];
    expect(
      transferOrdinals([
        at(0, x),
        at(1, y),
        at(2, x),
        at(3, x, "ADAO"),
        at(4, x, "USDC", other),
        at(5, x.toUpperCase() as Hex),
      ]),
    ).toEqual([0, 0, 1, 0, 0, 2]);
  });

  it("follows the head until shortly before the next tick is due", () => {
    expect(followTime(undefined)).toBe(0);
    // The default 1 s interval: head reads at 250, 500 and 750 ms.
    expect(followTime(1_000)).toBe(750);
    expect(followTime(500)).toBe(400);
    // A 100 ms interval leaves no room for a read.
    expect(followTime(100)).toBe(0);
    // A long interval, chosen to save RPC calls: capped.
    expect(followTime(60_000)).toBe(750);
  });

  it("plans confirmations from where each detecting transaction is now", () => {
    const row = (id: string, block: string | null): PaymentRow =>
      ({
        id,
        detected_tx_hash: `0x${id}`,
        detected_log_index: 0,
        detected_block_hash: block,
        gross_amount: "5000000",
      }) as PaymentRow;
    const plan = planConfirmations(
      [row("a", "0xa"), row("b", "0xb"), row("c", "0xc"), row("d", "0xd")],
      [{ number: 8n, hash: "0xa" }, { number: 9n, hash: "0xb" }, null, { number: 9n, hash: "0xnew" }],
      10n,
      3,
    );
    expect(plan.confirm.map((d) => d.paymentId)).toEqual(["a"]);
    expect(plan.move.map((d) => [d.paymentId, d.block.hash])).toEqual([["d", "0xnew"]]);
    expect(plan.revert).toEqual([{ paymentId: "c", txHash: "0xc", logIndex: 0, gross: 5_000_000n }]);
  });
});

describe("migration 011 on a database with history", () => {
  it("claims the transfers already accounted for, so a rescan after the upgrade skips them", async () => {
    const { db, close } = await openDatabase({});
    try {
      const migrator = (upTo: string) => migratorUpTo(db, upTo);
      expect((await migrator("010_rejected_transactions").migrateToLatest()).error).toBeUndefined();
      const detectedTx = hex(32);
      const unmatchedTx = hex(32);
      await sql`
        WITH ws AS (INSERT INTO workspaces (name) VALUES ('before the upgrade') RETURNING id),
        paid AS (
          INSERT INTO payments (workspace_id, environment, status, payment_method, payment_provider,
                                token_symbol, gross_amount, fee_amount, net_amount, wallet_type,
                                expires_at, detected_tx_hash, detected_log_index, detected_block)
          SELECT id, 'live', 'forwarded', 'crypto', 'onchain', 'USDC', 5, 0, 5, 'eoa', now(),
                 ${detectedTx}, 3, 17
          FROM ws
        )
        INSERT INTO unmatched_transfers (workspace_id, environment, token_symbol, amount, from_address,
                                         to_address, tx_hash, log_index, block_number, reason)
        SELECT id, 'live', 'USDC', 6, ${PAYER}, ${PAYER}, ${unmatchedTx}, -1, 18, 'no match' FROM ws
      `.execute(db);

      expect((await migrator("011_observed_transfers").migrateToLatest()).error).toBeUndefined();
      const claims = await sql<{ tx_hash: string; log_index: number; block_number: string }>`
        SELECT tx_hash, log_index, block_number::text FROM observed_transfers ORDER BY block_number
      `.execute(db);
      expect(claims.rows).toEqual([
        { tx_hash: detectedTx, log_index: 3, block_number: "17" },
        { tx_hash: unmatchedTx, log_index: -1, block_number: "18" },
      ]);
    } finally {
      await close();
    }
  });
});

describe("migration 012 on a database with history", () => {
  it("keys the claims by transaction, token, recipient and place in the transaction", async () => {
    const { db, close } = await openDatabase({});
    try {
      const migrator = (upTo: string) => migratorUpTo(db, upTo);
      expect((await migrator("011_observed_transfers").migrateToLatest()).error).toBeUndefined();
      const detectedTx = hex(32);
      const batchTx = hex(32);
      const receiving = `0x${"Ab".repeat(20)}`;
      await sql`
        WITH ws AS (INSERT INTO workspaces (name) VALUES ('before the upgrade') RETURNING id),
        paid AS (
          INSERT INTO payments (workspace_id, environment, status, payment_method, payment_provider,
                                token_symbol, gross_amount, fee_amount, net_amount, wallet_type,
                                receiving_address, expires_at, detected_tx_hash, detected_log_index,
                                detected_block)
          SELECT id, 'live', 'forwarded', 'crypto', 'onchain', 'USDC', 5, 0, 5, 'eoa', ${receiving},
                 now(), ${detectedTx}, 3, 17
          FROM ws
        )
        INSERT INTO unmatched_transfers (workspace_id, environment, token_symbol, amount, from_address,
                                         to_address, tx_hash, log_index, block_number, reason)
        SELECT id, 'live', 'USDC', amount, ${PAYER}, ${receiving}, ${batchTx}, log_index, 18, 'no match'
        FROM ws, (VALUES (6, 9), (7, 4)) AS v(amount, log_index)
      `.execute(db);
      await sql`
        INSERT INTO observed_transfers (environment, tx_hash, log_index, block_number)
        VALUES ('live', ${detectedTx}, 3, 17), ('live', ${batchTx}, 9, 18), ('live', ${batchTx}, 4, 18)
      `.execute(db);

      expect((await migrator("012_transfer_identity").migrateToLatest()).error).toBeUndefined();
      const claims = await sql`
        SELECT tx_hash, token_symbol, to_address, ordinal, log_index FROM observed_transfers
        ORDER BY block_number, ordinal
      `.execute(db);
      expect(claims.rows).toEqual([
        {
          tx_hash: detectedTx,
          token_symbol: "USDC",
          to_address: receiving.toLowerCase(),
          ordinal: 0,
          log_index: 3,
        },
        {
          tx_hash: batchTx,
          token_symbol: "USDC",
          to_address: receiving.toLowerCase(),
          ordinal: 0,
          log_index: 4,
        },
        {
          tx_hash: batchTx,
          token_symbol: "USDC",
          to_address: receiving.toLowerCase(),
          ordinal: 1,
          log_index: 9,
        },
      ]);
      // The same transfer presented again at another log index (a reorg) is not claimed again,
      // with every later migration applied too (033 puts these claims on the network `default`).
      expect((await migrator(LATEST).migrateToLatest()).error).toBeUndefined();
      const again = await matchTransfers(
        db as never,
        LIVE_DEFAULT,
        [
          {
            token: "USDC",
            from: PAYER,
            to: receiving as Hex,
            amount: 5n,
            txHash: detectedTx as Hex,
            logIndex: 12,
            blockNumber: 20n,
            blockHash: hex(32),
            workspaceId: null,
            ordinal: 0,
          },
        ],
        batchTransition("transfer_detected"),
        new Date(),
        "unmatched",
      );
      expect(again).toEqual([]);
    } finally {
      await close();
    }
  });
});
