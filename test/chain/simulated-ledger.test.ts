import { randomBytes } from "node:crypto";
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ChainToken, Hex } from "../../src/chain/network.ts";
import { SANDBOX_FAILURE_ADDRESS, SimulatedLedger, sandboxTxHash } from "../../src/chain/simulated/ledger.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { until } from "../support/poll.ts";

// The sandbox's simulated ledger (D3) with transfers asked for together made by one transaction:
// no overdraft whatever the mix, each transfer its own outcome, and nothing written twice.

const wallet = () => `0x${randomBytes(20).toString("hex")}` as Hex;
let t: TestApp;
let ledger: SimulatedLedger;
let ref = 0;
const reference = () => `test:${Date.now()}:${ref++}`;
const credit = (address: Hex, token: ChainToken, amount: bigint, network = "sandbox-a") =>
  ledger.credit({ network, address, token, amount, reference: reference() });

beforeAll(async () => {
  t = await startTestApp();
  ledger = new SimulatedLedger(t.database.db);
});
afterAll(async () => t.close());

async function statuses(hashes: string[]) {
  const rows = await t.database.db
    .selectFrom("ledger_transactions")
    .select(["tx_hash", "status"])
    .where("tx_hash", "in", hashes)
    .execute();
  return Object.fromEntries(rows.map((r) => [r.tx_hash, r.status]));
}

describe("simulated ledger transfers", () => {
  it("concurrent transfers from one wallet never overdraw it: those that fit succeed, the rest revert", async () => {
    const from = wallet();
    const to = wallet();
    await credit(from, "USDC", 10n);
    const refs = Array.from({ length: 5 }, reference);
    const results = await Promise.all(
      refs.map((r) =>
        ledger.transfer({ network: "sandbox-a", from, to, token: "USDC", amount: 3n, reference: r }),
      ),
    );
    expect(results.filter((r) => r.status === "success")).toHaveLength(3);
    expect(results.filter((r) => r.status === "reverted").map((r) => "error" in r && r.error)).toEqual([
      "insufficient balance",
      "insufficient balance",
    ]);
    expect(await ledger.balance("sandbox-a", from, "USDC")).toBe(1n);
    expect(await ledger.balance("sandbox-a", to, "USDC")).toBe(9n);
    // Every transfer is recorded once, with its own hash and outcome.
    const recorded = await statuses(refs.map(sandboxTxHash));
    expect(Object.values(recorded).sort()).toEqual(["reverted", "reverted", "success", "success", "success"]);
    expect(results.map((r) => r.txHash)).toEqual(refs.map(sandboxTxHash));
  });

  it("a batch mixing wallets, tokens, the failure address and an empty wallet gives each its own outcome", async () => {
    const [a, b, empty, to] = [wallet(), wallet(), wallet(), wallet()];
    await credit(a, "USDC", 5n);
    await credit(a, "ETH", 7n);
    await credit(b, "USDC", 2n);
    const results = await Promise.all([
      ledger.transfer({
        network: "sandbox-a",
        from: a,
        to,
        token: "USDC",
        amount: 5n,
        reference: reference(),
      }),
      ledger.transfer({
        network: "sandbox-a",
        from: a,
        to,
        token: "ETH",
        amount: 7n,
        reference: reference(),
      }),
      ledger.transfer({
        network: "sandbox-a",
        from: b,
        to: SANDBOX_FAILURE_ADDRESS as Hex,
        token: "USDC",
        amount: 1n,
        reference: reference(),
      }),
      ledger.transfer({
        network: "sandbox-a",
        from: b,
        to,
        token: "USDC",
        amount: 2n,
        reference: reference(),
      }),
      ledger.transfer({
        network: "sandbox-a",
        from: empty,
        to,
        token: "USDC",
        amount: 1n,
        reference: reference(),
      }),
    ]);
    expect(results.map((r) => (r.status === "success" ? "success" : r.error))).toEqual([
      "success",
      "success",
      "execution reverted (sandbox failure address)",
      "success",
      "insufficient balance",
    ]);
    expect(await ledger.balance("sandbox-a", a, "USDC")).toBe(0n);
    expect(await ledger.balance("sandbox-a", a, "ETH")).toBe(0n);
    expect(await ledger.balance("sandbox-a", b, "USDC")).toBe(0n);
    expect(await ledger.balance("sandbox-a", to, "USDC")).toBe(7n);
    expect(await ledger.balance("sandbox-a", to, "ETH")).toBe(7n);
  });

  it("two ledgers (two instances) transferring between the same wallets at once neither overdraw nor deadlock", async () => {
    const other = new SimulatedLedger(t.database.db);
    const [x, y] = [wallet(), wallet()];
    await credit(x, "USDC", 50n);
    await credit(y, "USDC", 50n);
    // Each instance debits both wallets in each of its batches: their locks cross.
    const moves = Array.from({ length: 40 }, (_, i) => {
      const [from, to] = i % 2 === 0 ? [x, y] : [y, x];
      return (i % 4 < 2 ? ledger : other).transfer({
        network: "sandbox-a",
        from,
        to,
        token: "USDC",
        amount: 4n,
        reference: reference(),
      });
    });
    const results = await Promise.all(moves);
    expect(results.every((r) => r.status === "success")).toBe(true);
    expect(
      (await ledger.balance("sandbox-a", x, "USDC")) + (await ledger.balance("sandbox-a", y, "USDC")),
    ).toBe(100n);
    expect(await ledger.balance("sandbox-a", x, "USDC")).toBeGreaterThanOrEqual(0n);
    expect(await ledger.balance("sandbox-a", y, "USDC")).toBeGreaterThanOrEqual(0n);
  });

  it("a transfer that waits for a wallet's debit lock sees the debit committed meanwhile", async () => {
    // A transfer is one statement, whose own snapshot predates the lock it waits for: the
    // balance must be read after the lock is granted, or it would spend money already gone.
    const [from, to] = [wallet(), wallet()];
    await credit(from, "USDC", 10n);
    let release = () => {};
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    let locked = () => {};
    const lockTaken = new Promise<void>((resolve) => {
      locked = resolve;
    });
    // Another instance's debit of 8, holding the wallet's debit lock until it commits.
    const other = t.database.db.transaction().execute(async (trx) => {
      await sql`SELECT pg_advisory_xact_lock(hashtext(${`ledger:${from.toLowerCase()}:USDC`}))`.execute(trx);
      await sql`INSERT INTO ledger_entries (address, token_symbol, amount, tx_hash)
                VALUES (${from.toLowerCase()}, 'USDC', -8, ${sandboxTxHash(reference())})`.execute(trx);
      locked();
      await held;
    });
    await lockTaken;
    const transfer = ledger.transfer({
      network: "sandbox-a",
      from,
      to,
      token: "USDC",
      amount: 5n,
      reference: reference(),
    });
    // On PostgreSQL, polled until the transfer's statement waits for the lock; the embedded
    // database runs one statement at a time, so there the transfer simply queues behind.
    if (process.env.DATABASE_URL)
      await until(
        "the transfer to wait for the debit lock",
        async () => {
          const { rows } = await sql<{ waiting: number }>`
            SELECT count(*)::int AS waiting FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
              AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`.execute(
            t.database.db,
          );
          return rows[0]?.waiting ?? 0;
        },
        (waiting) => waiting > 0,
        10_000,
        25,
      );
    release();
    await other;
    const result = await transfer;
    expect(result.status === "reverted" && result.error).toBe("insufficient balance");
    expect(await ledger.balance("sandbox-a", from, "USDC")).toBe(2n);
    expect(await ledger.balance("sandbox-a", to, "USDC")).toBe(0n);
  });

  it("keeps each simulated network's balances apart: money on sandbox-a cannot leave on sandbox-b", async () => {
    const [from, to] = [wallet(), wallet()];
    await credit(from, "USDC", 10n, "sandbox-a");
    await credit(from, "USDC", 4n, "sandbox-b");
    const onB = (amount: bigint) =>
      ledger.transfer({ network: "sandbox-b", from, to, token: "USDC", amount, reference: reference() });
    const tooMuch = await onB(5n);
    expect(tooMuch.status === "reverted" && tooMuch.error).toBe("insufficient balance");
    expect((await onB(4n)).status).toBe("success");
    expect(
      await Promise.all([
        ledger.currentBalance("sandbox-a", from, "USDC"),
        ledger.currentBalance("sandbox-b", from, "USDC"),
        ledger.currentBalance("sandbox-a", to, "USDC"),
        ledger.currentBalance("sandbox-b", to, "USDC"),
      ]),
    ).toEqual([10n, 0n, 0n, 4n]);
    const written = await t.database.db
      .selectFrom("ledger_transactions")
      .select("network")
      .where("to_address", "=", to.toLowerCase())
      .execute();
    expect(written.map((row) => row.network)).toEqual(["sandbox-b", "sandbox-b"]);
    // The previous release's debit check (the two-argument function) sees sandbox-a's money only.
    const { rows } = await sql<{ balance: string }>`
      SELECT ledger_debit_balance(${to.toLowerCase()}, 'USDC')::text AS balance`.execute(t.database.db);
    expect(rows[0]?.balance).toBe("0");
  });

  it("a busy wallet's balance stays a few parts that sum to its entries (a debit does not read its history)", async () => {
    const [from, to] = [wallet(), wallet()];
    await credit(from, "USDC", 1_000n);
    for (let i = 0; i < 40; i++) {
      const moved = await ledger.transfer({
        network: "sandbox-a",
        from,
        to,
        token: "USDC",
        amount: 3n,
        reference: reference(),
      });
      expect(moved.status).toBe("success");
      await credit(from, "USDC", 1n);
    }
    const sums = async (table: "ledger_entries" | "ledger_balance_parts", address: Hex) => {
      const row = await t.database.db
        .selectFrom(table)
        .select([
          sql<string>`coalesce(sum(amount), 0)::text`.as("sum"),
          sql<number>`count(*)::int`.as("rows"),
        ])
        .where("network", "=", "sandbox-a")
        .where("address", "=", address.toLowerCase())
        .where("token_symbol", "=", "USDC")
        .executeTakeFirstOrThrow();
      return { sum: BigInt(row.sum), rows: row.rows };
    };
    const [fromEntries, fromParts] = [
      await sums("ledger_entries", from),
      await sums("ledger_balance_parts", from),
    ];
    expect(fromEntries).toEqual({ sum: 1_000n - 120n + 40n, rows: 81 });
    expect(fromParts.sum).toBe(fromEntries.sum);
    // Merged by its debits once over 16: at most the 17 a debit merges plus its own part.
    expect(fromParts.rows).toBeLessThanOrEqual(18);
    expect(await ledger.balance("sandbox-a", from, "USDC")).toBe(920n);
    // A wallet only credited keeps a part per credit: its sum is still its entries'.
    expect((await sums("ledger_balance_parts", to)).sum).toBe(120n);
    expect(await ledger.currentBalance("sandbox-a", to, "USDC")).toBe(120n);
  });

  it("reads balances asked for together in one query, each its own", async () => {
    const [p, q, none] = [wallet(), wallet(), wallet()];
    await credit(p, "USDC", 11n);
    await credit(q, "ADAO", 12n);
    expect(
      await Promise.all([
        ledger.currentBalance("sandbox-a", p, "USDC"),
        ledger.currentBalance("sandbox-a", q, "ADAO"),
        ledger.currentBalance("sandbox-a", p, "ADAO"),
        ledger.currentBalance("sandbox-a", none, "USDC"),
        ledger.currentBalance("sandbox-a", p.toUpperCase().replace("0X", "0x"), "USDC"),
      ]),
    ).toEqual([11n, 12n, 0n, 0n, 11n]);
  });
});
