import { sql } from "kysely";
import { createPublicClient, createWalletClient, erc20Abi, type Hex, http } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { type Devnet, startDevnet } from "../src/devnet/chain.ts";
import { readCursor } from "../src/modules/payments/incoming/chain-repo.ts";
import { ChainWatcher } from "../src/modules/payments/incoming/chain-watcher.ts";
import * as repo from "../src/modules/payments/repo.ts";
import { PeriodicJob } from "../src/platform/jobs/periodic-job.ts";
import { createWorkspace, type TestApp } from "../test/support/app.ts";
import { LIVE_DEFAULT, liveNetworkEnv } from "../test/support/devnet-env.ts";
import { mineBacklog, type Pending, pendingOf, pendingPaymentRow } from "./chain-backlog.ts";
import { startPostgres } from "./service-process.ts";
import { cleanups, envInt, percentile, QUICK, QUICK_NOTE, QUICK_TAG, runAsScript } from "./support.ts";
import { startAppOn } from "./webhooks.ts";

// Chain watcher benchmark (`node bench/chain-watcher.ts [--pg]`): with 10,000 live pending
// payments across 100 workspaces, the time from a matching transfer's receipt to the payment being
// `detected` (the watcher as the service runs it: a periodic job every 1 s, the default polling
// interval), then the watcher's blocks per second over a 1,000-block backlog holding 5,000
// matching transfers. PostgreSQL when DATABASE_URL is set or with --pg (a throw-away server from
// scripts/local-postgres.sh), else PGlite. Goals: receipt → detected ≤ 1 s at the most; ≥ 200
// blocks/s through the backlog. BENCH_QUICK=1: 2,000 payments over 20 workspaces, 3 transfers
// timed, a backlog of 200 blocks. BENCH_WATCHER_TRANSFERS overrides the transfers timed (20): each
// waits out a random share of the watcher's 250 ms head poll, so a p50 of 20 moves by ±20 ms.

const WORKSPACES = QUICK ? 20 : 100;
const PAYMENTS = QUICK ? 2_000 : 10_000;
const LATENCY_TRANSFERS = envInt("BENCH_WATCHER_TRANSFERS", QUICK ? 3 : 20);
const TICK_INTERVAL_MS = 1_000;
const BACKLOG_BLOCKS = QUICK ? 200 : 1_000;
const TRANSFERS_PER_BLOCK = 5;
const GOALS = { detectionMs: 1_000, blocksPerSecond: 200 };

const log = (message: string) => process.stderr.write(`[bench:chain-watcher] ${message}\n`);
const sleep = (ms: number) => new Promise<void>((done) => setTimeout(done, ms));

/** 10,000 pending USDC payments, 100 per workspace EOA, each with an amount of its own. */
async function insertPayments(t: TestApp, eoas: Array<{ id: string; address: Hex }>): Promise<Pending[]> {
  const db = t.database.db;
  const now = Date.now();
  const pending: Pending[] = [];
  const perWorkspace = PAYMENTS / eoas.length;
  for (const [w, ws] of eoas.entries()) {
    const rows = Array.from({ length: perWorkspace }, (_, j) =>
      pendingPaymentRow(ws, LIVE_DEFAULT.id, w * perWorkspace + j, PAYMENTS, now),
    );
    pending.push(...rows.map(pendingOf));
    await db.transaction().execute(async (trx) => {
      for (const row of rows) await repo.insertPaymentsQuery([row]).execute(trx);
    });
  }
  // Autovacuum would have analyzed a table this size; PGlite never does on its own.
  await sql`ANALYZE payments`.execute(db);
  return pending;
}

export async function benchChainWatcher(
  opts: { databaseUrl?: string } = {},
): Promise<Record<string, unknown>> {
  let devnet: Devnet | undefined;
  let t: TestApp | undefined;
  let job: PeriodicJob | undefined;
  try {
    devnet = await startDevnet();
    const dn = devnet;
    t = await startAppOn(opts.databaseUrl, liveNetworkEnv(devnet));
    const app = t;
    const db = app.database.db;
    const network = app.app.ctx.chains.defaultOf("live")?.network;
    if (!network) throw new Error("no live network configured");

    const setupStart = performance.now();
    const eoas: Array<{ id: string; address: Hex }> = [];
    for (let i = 0; i < WORKSPACES; i++) {
      const ws = await createWorkspace(app, { name: `Bench workspace ${i}` });
      eoas.push({ id: ws.id, address: ws.eoaAddress as Hex });
    }
    const pending = await insertPayments(app, eoas);
    log(
      `${WORKSPACES} workspaces, ${pending.length} pending payments in ${Math.round(performance.now() - setupStart)} ms`,
    );

    // Detection latency: the watcher ticking as the service runs it, a PeriodicJob every second
    // (start to start). Its first tick sets the cursor at the head; from the second on, a tick
    // follows the head for most of its interval (a first tick cannot know the interval: see
    // followTime in the watcher), so the transfers start after one interval.
    const watcher = new ChainWatcher(db, network, app.app.ctx.log, () => new Date(), {
      pollIntervalMs: TICK_INTERVAL_MS,
    });
    const tickMs: number[] = [];
    job = new PeriodicJob(db, app.app.ctx.log, {
      name: "bench.chain.live",
      intervalMs: TICK_INTERVAL_MS,
      tick: async () => {
        const start = performance.now();
        try {
          await watcher.tick();
        } catch (err) {
          log(`tick failed: ${err instanceof Error ? err.message : String(err)}`);
        }
        tickMs.push(performance.now() - start);
      },
    });
    job.start();
    await sleep(TICK_INTERVAL_MS);

    const payer = privateKeyToAccount(dn.accounts.payer.privateKey);
    const wallet = createWalletClient({ account: payer, chain: dn.chain, transport: http(dn.rpcUrl) });
    const client = createPublicClient({ chain: dn.chain, transport: http(dn.rpcUrl) });
    const detection: number[] = [];
    for (let i = 0; i < LATENCY_TRANSFERS; i++) {
      const target = pending[(i * 487) % pending.length] as Pending;
      await sleep(Math.random() * TICK_INTERVAL_MS); // a random phase against the tick loop
      const hash = await wallet.writeContract({
        address: dn.tokens.USDC,
        abi: erc20Abi,
        functionName: "transfer",
        args: [target.to, target.amount],
      });
      await client.getTransactionReceipt({ hash }); // automine: already mined
      const receiptAt = Date.now();
      for (const deadline = Date.now() + 30_000; ; ) {
        const row = await db
          .selectFrom("payments")
          .select(["status", "detected_at"])
          .where("id", "=", target.id)
          .executeTakeFirstOrThrow();
        if (row.detected_at) {
          detection.push(row.detected_at.getTime() - receiptAt);
          break;
        }
        if (Date.now() > deadline) throw new Error(`payment ${target.id} not detected within 30 s`);
        await sleep(10);
      }
    }
    await job.stop();
    job = undefined;
    const detectionSorted = [...detection].sort((a, b) => a - b);
    const ticksSorted = [...tickMs].sort((a, b) => a - b);
    log(
      `detection: p50 ${percentile(detectionSorted, 50)} ms, max ${detectionSorted.at(-1)} ms; tick p50 ${percentile(ticksSorted, 50).toFixed(0)} ms`,
    );

    // Backlog: 1,000 blocks of 5 matching transfers each, mined with the watcher stopped.
    const used = new Set(Array.from({ length: LATENCY_TRANSFERS }, (_, i) => (i * 487) % pending.length));
    const targets = pending.filter((_, i) => !used.has(i)).slice(0, BACKLOG_BLOCKS * TRANSFERS_PER_BLOCK);
    const cursorBefore = await readCursor(db, LIVE_DEFAULT);
    const headBefore = await client.getBlockNumber();
    const { head, buildMs } = await mineBacklog(dn, targets, TRANSFERS_PER_BLOCK);
    if (!cursorBefore) throw new Error("no cursor");
    const backlogBlocks = Number(head - cursorBefore.block);
    log(
      `backlog: ${targets.length} transfers in ${Number(head - headBefore)} blocks built in ${Math.round(buildMs)} ms; ${backlogBlocks} blocks behind`,
    );

    // Catch up: ticks until the cursor is at the head; the cursor is watched to time the scan alone.
    const catchUpStart = performance.now();
    let scannedAt = Number.NaN;
    let watching = true;
    const watch = (async () => {
      while (watching) {
        const cursor = await readCursor(db, LIVE_DEFAULT);
        if (cursor && cursor.block >= head) {
          scannedAt = performance.now();
          return;
        }
        await sleep(20);
      }
    })();
    let ticks = 0;
    const catchUpTicks: number[] = [];
    for (;;) {
      const start = performance.now();
      await watcher.tick();
      catchUpTicks.push(performance.now() - start);
      ticks++;
      const cursor = await readCursor(db, LIVE_DEFAULT);
      if (cursor && cursor.block >= head) break;
    }
    const tickedMs = performance.now() - catchUpStart;
    watching = false;
    await watch;
    const scanMs = (Number.isNaN(scannedAt) ? performance.now() : scannedAt) - catchUpStart;
    const blocksPerSecond = backlogBlocks / (scanMs / 1000);
    const detected = await db
      .selectFrom("payments")
      .select((eb) => eb.fn.countAll<string>().as("n"))
      .where("environment", "=", "live")
      .where("detected_at", "is not", null)
      .executeTakeFirstOrThrow();
    log(
      `catch-up: cursor at head after ${Math.round(scanMs)} ms (${Math.round(blocksPerSecond)} blocks/s); ${ticks} tick(s) took ${Math.round(tickedMs)} ms; ${detected.n} payments detected`,
    );

    // Where the time goes: the same scan's RPC calls alone (logs + every block with its transactions).
    const addresses = eoas.map((e) => e.address);
    const rpcStart = performance.now();
    for (let from = cursorBefore.block + 1n; from <= head; from += 200n) {
      const to = from + 199n < head ? from + 199n : head;
      await Promise.all([network.incomingTransfers(from, to, addresses), network.block(to)]);
    }
    const rpcOnlyMs = performance.now() - rpcStart;
    log(`the scan's RPC calls alone: ${Math.round(rpcOnlyMs)} ms`);

    const p50 = percentile(detectionSorted, 50);
    const p99 = percentile(detectionSorted, 99);
    const max = detectionSorted.at(-1) ?? Number.NaN;
    return {
      database: opts.databaseUrl ? "PostgreSQL" : "PGlite",
      workspaces: WORKSPACES,
      pendingPayments: pending.length,
      latencyTransfers: detection.length,
      detectionP50Ms: p50,
      detectionP99Ms: p99,
      detectionMaxMs: max,
      tickIntervalMs: TICK_INTERVAL_MS,
      tickP50Ms: Math.round(percentile(ticksSorted, 50)),
      tickMaxMs: Math.round(ticksSorted.at(-1) ?? Number.NaN),
      backlogBlocks,
      backlogTransfers: targets.length,
      backlogBuildMs: Math.round(buildMs),
      backlogScanMs: Math.round(scanMs),
      backlogRpcOnlyMs: Math.round(rpcOnlyMs),
      backlogTicks: ticks,
      backlogTicksMs: catchUpTicks.map(Math.round),
      blocksPerSecond: Math.round(blocksPerSecond),
      paymentsDetected: Number(detected.n),
      goalDetectionMs: GOALS.detectionMs,
      goalDetectionMet: max <= GOALS.detectionMs,
      goalBlocksPerSecond: GOALS.blocksPerSecond,
      goalBlocksPerSecondMet: blocksPerSecond >= GOALS.blocksPerSecond,
    };
  } finally {
    await job?.stop().catch(() => {});
    await t?.close().catch((err: unknown) => log(`app close: ${String(err)}`));
    await devnet?.stop();
  }
}

export function chainWatcherTable(r: Record<string, unknown>): string {
  const met = (ok: unknown) => (ok ? "met" : "**missed**");
  return [
    `Chain watcher${QUICK_TAG} (${r.database}, ${Number(r.pendingPayments).toLocaleString("en-US")} pending payments over ${r.workspaces} workspaces, tick every ${r.tickIntervalMs} ms)`,
    "",
    "| Metric | Value | Goal | Result |",
    "| :-- | --: | --: | :-- |",
    `| Receipt → detected p50 (${r.latencyTransfers} transfers) | ${r.detectionP50Ms} ms | | |`,
    `| Receipt → detected p99 | ${r.detectionP99Ms} ms | | |`,
    `| Receipt → detected max | ${r.detectionMaxMs} ms | ≤ ${GOALS.detectionMs} ms | ${met(r.goalDetectionMet)} |`,
    `| Tick duration p50 / max (latency phase; a tick follows the head for most of its interval) | ${r.tickP50Ms} / ${r.tickMaxMs} ms | | |`,
    `| Backlog: blocks/s (${r.backlogBlocks} blocks, ${Number(r.backlogTransfers).toLocaleString("en-US")} transfers, cursor at head after ${r.backlogScanMs} ms) | ${r.blocksPerSecond} | ≥ ${GOALS.blocksPerSecond} | ${met(r.goalBlocksPerSecondMet)} |`,
    `| Backlog: the scan's RPC calls alone (getLogs + blocks with transactions) | ${r.backlogRpcOnlyMs} ms | | |`,
    `| Backlog ticks (ms each, incl. confirmations) | ${(r.backlogTicksMs as number[]).join(", ")} | | |`,
    `| Payments detected in all | ${r.paymentsDetected} | | |`,
    ...(QUICK ? ["", QUICK_NOTE] : []),
  ].join("\n");
}

const steps = cleanups(log);
await runAsScript(
  import.meta.url,
  log,
  async () => {
    let databaseUrl = process.env.DATABASE_URL;
    if (!databaseUrl && process.argv.includes("--pg")) {
      databaseUrl = await startPostgres("chain-watcher", steps, log);
      log(`throw-away PostgreSQL at ${databaseUrl}`);
    }
    const result = await benchChainWatcher({ databaseUrl });
    process.stdout.write(`\n${chainWatcherTable(result)}\n`);
  },
  steps,
);
