import { loadavg } from "node:os";
import { formatUnits } from "viem";
import type { DevnetClients } from "../test/support/devnet-clients.ts";
import type { ServiceProcess } from "../test/support/service-process.ts";
import {
  api,
  type DevnetService,
  liveWorkspace,
  type PaymentJson,
  randomAddress,
  same,
  startDevnetService,
  type WalletKind,
} from "./devnet-service.ts";
import {
  AMOUNT,
  BY_HAND,
  check,
  parts,
  type Scenario,
  type SettlementJson,
  SPLITS,
  TOKEN_DECIMALS,
  units,
} from "./splits-check.ts";
import {
  cleanups,
  envInt,
  type Goal,
  goalLines,
  type LatencySummary,
  QUICK,
  QUICK_NOTE,
  QUICK_TAG,
  runAsScript,
  summarize,
} from "./support.ts";

// Settlement with splits (issue 24, D15) on the devnet: live USDC payments settled from the
// workspace EOA (one signed transaction per leg: merchant, fee, each split) and from the
// workspace's smart wallet (ONE sponsored user operation carrying every leg), each without splits
// and with 3 splits. Four scenarios, one workspace each, on one devnet and one service:
// EOA / EOA + 3 splits / smart wallet / smart wallet + 3 splits.
//
// Payments are paid ONE AT A TIME (each its own transfer, mined at once by automine; the next is
// paid once the previous one is forwarded), taking the four scenarios in turn (round-robin), so
// that no settlement queues behind another and a drift of the machine's load falls on all four
// alike. Each workspace first settles one unmeasured payment (the smart wallet is deployed then).
//
// Measured per payment: confirmation → forwarded, by the service's own clock: the payment's
// `updatedAt` as GET /api/v1/payments/{id} shows it while the payment is `confirmed` (it is then
// the row's confirmed_at: the watcher sets both) and once it is `forwarded` (then forwarded_at,
// = the settlement's settled_at; checked against GET /api/v1/settlements' createdAt). The bench
// polls every POLL_MS; the poll's timing only decides whether `confirmed` is seen at all, not the
// figure. The same span as the bench saw it (first poll showing `confirmed` → first showing
// `forwarded`) is reported beside it. The chain job confirms and then settles in one tick, so the
// span is the settlement itself: building, recording and sending the legs and waiting for them.
//
// Checked at the end (bigint, from D15 by hand, not from src/): fee = gross × 150 / 10000 rounded
// half up, net = gross − fee, each split = floor(net × bps / 10000), merchant = net − Σ splits.
// Every scenario has fresh merchant and split addresses: each must hold exactly (N + 1) × its part
// (the warm-up included); the treasury gained exactly the fees; every receiving wallet is empty;
// every settlement record (GET /api/v1/settlements) carries those parts, all `sent`, with distinct
// transactions per leg from the EOA and one transaction for every leg from the smart wallet.
// A failed check exits 1 (after the table); a missed goal does not, as in the other benches.
//
// The parts by hand and the check are in bench/splits-check.ts.
//
// `node bench/splits.ts` prints a markdown table. BENCH_SPLITS_PAYMENTS overrides 20 per scenario
// (1 with BENCH_QUICK=1).

const BLOCK_TIME_MS = 1000;
const POLL_MS = 5;
const PAYMENT_TIMEOUT_MS = 60_000;
const GOAL_RATIO = 1.2;

const log = (message: string) => process.stderr.write(`[bench:splits] ${message}\n`);
const sleep = (ms: number) => new Promise<void>((done) => setTimeout(done, ms));

const steps = cleanups(log);

// ---------------------------------------------------------------------------------------------

async function setUp(env: DevnetService, kind: WalletKind, withSplits: boolean): Promise<Scenario> {
  const { service } = env;
  const name = `${kind === "eoa" ? "EOA" : "Smart wallet"}, ${withSplits ? "3 splits" : "no splits"}`;
  // Fresh addresses: what they hold at the end is exactly what was settled to them.
  const merchant = randomAddress();
  const { key, receiving } = await liveWorkspace(env, kind, `Splits bench (${name})`, merchant);
  const destinations = withSplits ? SPLITS.map(() => randomAddress()) : [];
  if (withSplits) {
    const answer = await api<{ enabled: boolean; splits: Array<{ destination: string }> }>(
      service,
      "PUT",
      "/api/v1/splits",
      key,
      [200],
      { enabled: true, splits: SPLITS.map((s, i) => ({ ...s, destination: destinations[i] })) },
    );
    if (!answer.enabled || answer.splits.length !== SPLITS.length)
      throw new Error(`PUT /api/v1/splits answered ${JSON.stringify(answer)}`);
  }
  return {
    name,
    kind,
    withSplits,
    key,
    receiving,
    merchant,
    destinations,
    settled: [],
    serviceMs: [],
    seenMs: [],
    missed: 0,
  };
}

/**
 * One payment created, paid by one transfer (mined at once: automine) and polled every POLL_MS
 * until forwarded; the confirmation → forwarded span, by the service's timestamps and as seen.
 */
async function payOne(service: ServiceProcess, clients: DevnetClients, s: Scenario) {
  const { fee, net } = parts(units(AMOUNT), []);
  const created = await api<{ payment: PaymentJson; receivingAddress: string }>(
    service,
    "POST",
    "/api/v1/payments",
    s.key,
    [201],
    { tokenSymbol: "USDC", amount: AMOUNT },
  );
  const p = created.payment;
  if (!same(created.receivingAddress, s.receiving) || p.walletType !== s.kind || p.status !== "pending")
    throw new Error(`${s.name}: unexpected payment: ${JSON.stringify(created).slice(0, 500)}`);
  if (units(p.feeAmount) !== fee || units(p.netAmount) !== net)
    throw new Error(
      `${s.name}: payment ${p.id}: fee ${p.feeAmount} net ${p.netAmount}, expected ${fee} ${net}`,
    );

  const paidBy = await clients.sendUsdc(s.receiving, units(AMOUNT));
  const receipt = await clients.chain.waitForTransactionReceipt({ hash: paidBy });
  if (receipt.status !== "success") throw new Error(`${s.name}: the payer's transfer ${paidBy} reverted`);

  const path = `/api/v1/payments/${p.id}`;
  const deadline = performance.now() + PAYMENT_TIMEOUT_MS;
  let confirmed: { seenAt: number; updatedAt: string } | undefined;
  for (;;) {
    const { payment } = await api<{ payment: PaymentJson }>(service, "GET", path, s.key, [200]);
    const seenAt = performance.now();
    if (payment.status === "confirmed") confirmed ??= { seenAt, updatedAt: payment.updatedAt };
    else if (payment.status === "forwarded") {
      const page = await api<{ settlements: SettlementJson[] }>(
        service,
        "GET",
        `/api/v1/settlements?paymentId=${p.id}`,
        s.key,
        [200],
      );
      const settlement = page.settlements[0];
      if (!settlement || page.settlements.length !== 1)
        throw new Error(`${s.name}: payment ${p.id} forwarded with ${page.settlements.length} settlements`);
      // No poll saw it confirmed (a settlement quicker than a poll): no figure, counted as missed.
      const span = confirmed && {
        serviceMs: Date.parse(payment.updatedAt) - Date.parse(confirmed.updatedAt),
        seenMs: seenAt - confirmed.seenAt,
      };
      return { payment, settlement, paidBy, span };
    } else if (payment.status !== "pending" && payment.status !== "detected")
      throw new Error(`${s.name}: payment ${p.id} ${payment.status}: ${payment.failureReason ?? ""}`);
    if (performance.now() > deadline)
      throw new Error(
        `${s.name}: payment ${p.id} not forwarded within ${PAYMENT_TIMEOUT_MS} ms (${payment.status})`,
      );
    await sleep(POLL_MS);
  }
}

// ---------------------------------------------------------------------------------------------

export interface SplitsBenchFigures {
  config: Record<string, string>;
  scenarios: Array<{
    name: string;
    kind: WalletKind;
    withSplits: boolean;
    payments: number;
    missed: number;
    legs: number;
    transactions: number;
    service: LatencySummary;
    seen: LatencySummary;
  }>;
  goal: Goal;
  eoaRatio: number;
  loadBefore: number[];
  loadAfter: number[];
  problems: string[];
}

export async function benchSplits(): Promise<SplitsBenchFigures> {
  const count = envInt("BENCH_SPLITS_PAYMENTS", QUICK ? 1 : 20);
  const byHand = parts(
    units(AMOUNT),
    SPLITS.map((s) => s.percentBps),
  );
  const text = (v: unknown) => JSON.stringify(v, (_, x) => (typeof x === "bigint" ? x.toString() : x));
  if (text(byHand) !== text(BY_HAND))
    throw new Error(`the parts of ${AMOUNT} USDC are not the ones worked out by hand`);
  const loadBefore = loadavg();
  try {
    const env = await startDevnetService("splits", BLOCK_TIME_MS, steps, log);
    const { devnet, live, service, clients } = env;
    const treasury = devnet.accounts.treasury.address;
    const treasuryBefore = await clients.usdcBalance(treasury);

    const scenarios: Scenario[] = [];
    try {
      for (const kind of ["eoa", "smart_wallet"] as const)
        for (const withSplits of [false, true]) scenarios.push(await setUp(env, kind, withSplits));
      for (const s of scenarios) {
        log(`${s.name}: warm-up payment (unmeasured)`);
        const { payment, settlement, paidBy } = await payOne(service, clients, s);
        s.settled.push({ payment, settlement, paidBy });
      }
      for (let i = 1; i <= count; i++) {
        for (const s of scenarios) {
          const { payment, settlement, paidBy, span } = await payOne(service, clients, s);
          s.settled.push({ payment, settlement, paidBy });
          if (span) {
            s.serviceMs.push(span.serviceMs);
            s.seenMs.push(span.seenMs);
          } else s.missed += 1;
        }
        log(
          `${i}/${count}: ${scenarios.map((s) => `${s.name} ${s.serviceMs.at(-1)?.toFixed(0)} ms`).join(" · ")}`,
        );
      }
    } catch (err) {
      log(`the service's last output:\n${service.output().slice(-3000)}`);
      throw err;
    }

    log("checking balances and settlement records");
    const problems: string[] = [];
    for (const s of scenarios) problems.push(...(await check(s, clients)));
    const fees = BigInt(scenarios.reduce((sum, s) => sum + s.settled.length, 0)) * byHand.fee;
    const treasuryGain = (await clients.usdcBalance(treasury)) - treasuryBefore;
    if (treasuryGain !== fees) problems.push(`the treasury gained ${treasuryGain}, expected ${fees}`);

    const figures = scenarios.map((s) => {
      const last = s.settled.at(-1);
      const legs = 2 + s.destinations.length;
      return {
        name: s.name,
        kind: s.kind,
        withSplits: s.withSplits,
        payments: s.serviceMs.length,
        missed: s.missed,
        legs,
        transactions: last
          ? new Set(
              [
                last.settlement.txRef,
                last.payment.settlementTxHashes?.fee,
                ...last.settlement.splits.map((x) => x.txRef),
              ].map((tx) => tx?.toLowerCase()),
            ).size
          : 0,
        service: summarize(s.serviceMs),
        seen: summarize(s.seenMs),
      };
    });
    const p50 = (kind: WalletKind, withSplits: boolean) =>
      figures.find((f) => f.kind === kind && f.withSplits === withSplits)?.service.p50 ?? Number.NaN;
    const ratio = p50("smart_wallet", true) / p50("smart_wallet", false);
    return {
      config: {
        payments: `${count} × ${AMOUNT} USDC per scenario (+ 1 unmeasured warm-up each), one workspace each`,
        order: "one payment at a time, the four scenarios in turn",
        splits: SPLITS.map((s) => `${s.label} ${s.percentBps} bps`).join(", "),
        LIVE_CONFIRMATIONS: live.LIVE_CONFIRMATIONS ?? "",
        LIVE_POLL_INTERVAL_MS: live.LIVE_POLL_INTERVAL_MS ?? "",
        devnet: `automine + a block every ${BLOCK_TIME_MS} ms`,
        bundler: "Alto, standard send (no LIVE_BUNDLER_INSTANT_BUNDLING, as the tests)",
        service: "node src/main.ts, embedded PGlite under DATA_DIR",
        poll: `GET /api/v1/payments/{id} every ${POLL_MS} ms`,
      },
      scenarios: figures,
      goal: {
        text: `smart wallet with 3 splits p50 ≤ ${GOAL_RATIO} × smart wallet without splits p50: ${p50("smart_wallet", true).toFixed(0)} ms vs ${p50("smart_wallet", false).toFixed(0)} ms = ${ratio.toFixed(2)}×`,
        met: ratio <= GOAL_RATIO,
      },
      eoaRatio: p50("eoa", true) / p50("eoa", false),
      loadBefore,
      loadAfter: loadavg(),
      problems,
    };
  } finally {
    await steps.cleanupAll();
  }
}

export function renderSplitsTable(f: SplitsBenchFigures): string {
  const ms = (n: number) => n.toFixed(0);
  const usdc = (n: bigint) => formatUnits(n, TOKEN_DECIMALS);
  const load = (l: number[]) => l.map((x) => x.toFixed(2)).join(" / ");
  const rows = f.scenarios.map(
    (s) =>
      `| ${s.name} | ${s.payments}${s.missed ? ` (+${s.missed} missed)` : ""} | ${s.legs} | ${s.transactions} | ${ms(s.service.p50)} | ${ms(s.service.p99)} | ${ms(s.service.min)}–${ms(s.service.max)} | ${ms(s.seen.p50)} | ${ms(s.seen.p99)} |`,
  );
  const p = parts(
    units(AMOUNT),
    SPLITS.map((s) => s.percentBps),
  );
  return [
    `| Settlement${QUICK_TAG} | Payments | Legs | Settlement txs | p50 ms | p99 ms | min–max ms | p50 ms (polls) | p99 ms (polls) |`,
    "| :-- | --: | --: | --: | --: | --: | --: | --: | --: |",
    ...rows,
    "",
    "ms: from the payment's confirmation to its forwarding, by the service's timestamps (updatedAt while confirmed → updatedAt once forwarded); (polls): the same span as the bench's polls saw it.",
    `With splits, EOA 3 splits / no splits at p50: ${f.eoaRatio.toFixed(2)}×.`,
    `Parts of one ${AMOUNT} USDC payment: fee ${usdc(p.fee)}, net ${usdc(p.net)}, ${SPLITS.map((s, i) => `${s.label} ${usdc(p.splits[i] ?? 0n)}`).join(", ")}, merchant ${usdc(p.merchant)}.`,
    f.problems.length === 0
      ? "Correctness: every merchant and split address, the treasury and every receiving wallet hold exactly what D15 says; every settlement record matches, one transaction per leg from the EOA, one for all legs from the smart wallet."
      : `Correctness: **${f.problems.length} problems**:\n${f.problems.map((x) => `  - ${x}`).join("\n")}`,
    `Load average (1/5/15 min) before: ${load(f.loadBefore)}, after: ${load(f.loadAfter)}.`,
    "",
    `Configuration: ${Object.entries(f.config)
      .map(([k, v]) => `${k} ${v}`)
      .join("; ")}.`,
    "",
    ...goalLines([f.goal]),
  ].join("\n");
}

await runAsScript(
  import.meta.url,
  log,
  async () => {
    const figures = await benchSplits();
    process.stdout.write(
      `\n${renderSplitsTable(figures)}\n\nDevnet (Hardhat node + Alto bundler), service and bench on one 2-core machine shared with other processes.\n${QUICK ? `\n${QUICK_NOTE}\n` : ""}`,
    );
    if (figures.problems.length > 0)
      throw new Error(`${figures.problems.length} correctness problems (see the table)`);
  },
  steps,
);
