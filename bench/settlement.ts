import { type Address, erc20Abi, formatUnits, type Hex, parseUnits } from "viem";
import { type Devnet, rpc } from "../src/devnet/chain.ts";
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
  cleanups,
  envInt,
  type LatencySummary,
  QUICK,
  QUICK_NOTE,
  QUICK_TAG,
  runAsScript,
  summarize,
} from "./support.ts";

// Crypto-payment settlement on the devnet: N live USDC payments in one workspace are created
// through the API, paid on chain in ONE block (automine and interval mining paused while the payer
// sends, then evm_mine), and the service detects, confirms and settles them (net → the workspace's
// settlement address, 1.5 % fee → the treasury). Two scenarios on one devnet and one service:
// (1) payments received on the workspace EOA (the default wallet type), settled by two signed
// transactions each; (2) the workspace's default wallet type set to its smart wallet, settled by
// sponsored user operations through the Alto bundler.
// Measured: wall time from the payers' block to the last payment seen `forwarded`, settlements/s
// over it, and per payment the time from its transfer's block to its `forwarded` (p50, p99), as
// seen by polling GET /api/v1/payments every POLL_MS. Then the exact outcome is checked: every
// payment forwarded by its own transfer, and the settlement address and the treasury received
// exactly N × net and N × fee (the service's bigint split: fee = gross × 150 / 10000 rounded half up).
//
// The service runs as its own process on the devnet as bench/devnet-service.ts starts them (the
// process starts the chain job itself, so this file needs nothing from src/ but the devnet and runs
// on an older tree given this tree's bench/ and test/support/), configured as the live tests have
// it, with the devnet's defaults (automine plus a block every second).
// Each workspace first settles one unmeasured payment: the smart wallet is then deployed, so the
// figure is of settlements alone. (Before 1fadf59 a batch meeting an undeployed smart wallet
// failed AA10, every operation carrying the deployment; BENCH_SETTLEMENT_WARMUP=0 skips the
// warm-up, to show it on such a tree.)
//
// No goal is set for it: the table shows the figures alone.
//
// `node bench/settlement.ts` prints a markdown table. BENCH_SETTLEMENT_PAYMENTS overrides 40 (5
// with BENCH_QUICK=1).

const TOKEN_DECIMALS = 6;
const AMOUNT = "10";
const FEE_BPS = 150n;
const BPS = 10_000n;
/** The devnet's interval mining period (startDevnet's default), restored after each payers' block. */
const BLOCK_TIME_MS = 1000;
const POLL_MS = 20;
const SETTLE_TIMEOUT_MS = 180_000;

const log = (message: string) => process.stderr.write(`[bench:settlement] ${message}\n`);
const sleep = (ms: number) => new Promise<void>((done) => setTimeout(done, ms));

const steps = cleanups(log);

// ---------------------------------------------------------------------------------------------
// Helpers

/** The service's split (src/domain/money.ts): fee = gross × 150 / 10000 rounded half up, net = the rest. */
function splitFee(gross: bigint): { fee: bigint; net: bigint } {
  const fee = (gross * FEE_BPS + BPS / 2n) / BPS;
  return { fee, net: gross - fee };
}

// ---------------------------------------------------------------------------------------------
// The chain, seen from outside the service

/**
 * The payer sends `count` USDC transfers of `amount` to `to`, all in one block: automine and
 * interval mining are paused while it sends (explicit nonces, gas and fees: nothing waits for a
 * block), then evm_mine mines them together and mining is restored as startDevnet set it.
 * Returns the transfers' hashes, the block and the moment it was mined.
 */
async function payInOneBlock(
  devnet: Devnet,
  clients: DevnetClients,
  to: Address,
  amount: bigint,
  count: number,
) {
  const { chain, payer } = clients;
  const transfer = { address: devnet.tokens.USDC, abi: erc20Abi, functionName: "transfer" } as const;
  const gas = await chain.estimateContractGas({ ...transfer, args: [to, amount], account: payer.account });
  const fees = await chain.estimateFeesPerGas();
  const first = await chain.getTransactionCount({ address: payer.account.address, blockTag: "pending" });
  const hashes: Hex[] = [];
  let minedAt: number;
  await rpc(devnet.rpcUrl, "evm_setAutomine", [false]);
  await rpc(devnet.rpcUrl, "evm_setIntervalMining", [0]);
  try {
    for (let i = 0; i < count; i++) {
      hashes.push(
        await payer.writeContract({
          ...transfer,
          args: [to, amount],
          nonce: first + i,
          gas: gas * 2n,
          ...fees,
        }),
      );
    }
    await rpc(devnet.rpcUrl, "evm_mine", []);
    minedAt = performance.now();
  } finally {
    await rpc(devnet.rpcUrl, "evm_setAutomine", [true]);
    await rpc(devnet.rpcUrl, "evm_setIntervalMining", [BLOCK_TIME_MS]);
  }
  const receipts = await Promise.all(hashes.map((hash) => chain.getTransactionReceipt({ hash })));
  const failed = receipts.filter((r) => r.status !== "success");
  if (failed.length > 0) throw new Error(`${failed.length} payer transfers reverted`);
  const blocks = new Set(receipts.map((r) => r.blockNumber));
  if (blocks.size !== 1) throw new Error(`the payer transfers landed in ${blocks.size} blocks, not one`);
  return { hashes, block: receipts[0]?.blockNumber ?? 0n, minedAt };
}

// ---------------------------------------------------------------------------------------------
// One scenario

export interface ScenarioFigures {
  kind: WalletKind;
  payments: number;
  /** From the payers' block mined to the last payment seen forwarded. */
  wallMs: number;
  settlementsPerSecond: number;
  /** Per payment, from its transfer's block mined to it seen forwarded. */
  latency: LatencySummary;
  /** Received by the settlement address and the treasury, checked equal to N × net and N × fee. */
  netTotal: bigint;
  feeTotal: bigint;
  /** Distinct settlement transactions (the smart wallet's net and fee share a user operation's). */
  settlementTransactions: number;
}

/** Pages through GET /api/v1/payments (the workspace's live payments, newest first). */
async function listPayments(service: ServiceProcess, key: string): Promise<PaymentJson[]> {
  const all: PaymentJson[] = [];
  for (let offset = 0; ; offset += 100) {
    const page = await api<{ payments: PaymentJson[]; total: number }>(
      service,
      "GET",
      `/api/v1/payments?limit=100&offset=${offset}`,
      key,
      [200],
    );
    all.push(...page.payments);
    if (page.payments.length < 100 || all.length >= page.total) return all;
  }
}

/**
 * Polls the workspace's payments every POLL_MS until all are forwarded; the moment each was first
 * seen so. Fails at once when one fails or expires, and when SETTLE_TIMEOUT_MS has passed.
 */
async function waitForwarded(service: ServiceProcess, key: string, ids: string[]) {
  const seen = new Map<string, { at: number; payment: PaymentJson }>();
  const wanted = new Set(ids);
  const deadline = performance.now() + SETTLE_TIMEOUT_MS;
  let last: PaymentJson[] = [];
  while (seen.size < wanted.size) {
    if (performance.now() > deadline) {
      const counts = last.reduce<Record<string, number>>((c, p) => {
        c[p.status] = (c[p.status] ?? 0) + 1;
        return c;
      }, {});
      throw new Error(
        `${wanted.size - seen.size} of ${wanted.size} payments not forwarded within ${SETTLE_TIMEOUT_MS} ms: ${JSON.stringify(counts)}`,
      );
    }
    last = await listPayments(service, key);
    const at = performance.now();
    for (const payment of last) {
      if (!wanted.has(payment.id) || seen.has(payment.id)) continue;
      if (payment.status === "forwarded") seen.set(payment.id, { at, payment });
      else if (payment.status === "failed" || payment.status === "expired")
        throw new Error(`payment ${payment.id} ${payment.status}: ${payment.failureReason ?? ""}`);
    }
    if (seen.size < wanted.size) await sleep(POLL_MS);
  }
  return seen;
}

async function scenario(
  env: DevnetService,
  kind: WalletKind,
  count: number,
  warmUp: boolean,
): Promise<ScenarioFigures> {
  const { service, devnet, clients } = env;
  // A fresh settlement address per scenario: what it holds afterwards is exactly what was settled.
  const settlementAddress = randomAddress();
  const { key, receiving } = await liveWorkspace(env, kind, `Settlement bench (${kind})`, settlementAddress);

  const gross = parseUnits(AMOUNT, TOKEN_DECIMALS);
  const { fee, net } = splitFee(gross);
  // No walletType: the workspace's default decides where the payment is received.
  const createPayments = async (n: number): Promise<string[]> => {
    const ids: string[] = [];
    for (let i = 0; i < n; i++) {
      const res = await api<{ payment: PaymentJson; receivingAddress: string }>(
        service,
        "POST",
        "/api/v1/payments",
        key,
        [201],
        { tokenSymbol: "USDC", amount: AMOUNT },
      );
      const p = res.payment;
      if (!same(res.receivingAddress, receiving) || p.walletType !== kind || p.status !== "pending")
        throw new Error(`unexpected payment: ${JSON.stringify(res).slice(0, 500)}`);
      if (!same(p.merchantWallet, settlementAddress))
        throw new Error(`payment ${p.id} settles to ${p.merchantWallet}, not the workspace's address`);
      if (parseUnits(p.feeAmount, TOKEN_DECIMALS) !== fee || parseUnits(p.netAmount, TOKEN_DECIMALS) !== net)
        throw new Error(`payment ${p.id}: fee ${p.feeAmount} net ${p.netAmount}, expected ${fee} ${net}`);
      ids.push(p.id);
    }
    return ids;
  };

  if (warmUp) {
    // Unmeasured: the first settlement from a smart wallet also deploys it (initCode), and a batch
    // on an undeployed wallet is a different thing to measure (see BENCH_SETTLEMENT_WARMUP).
    log(`${kind}: warm-up, one payment settled first`);
    const first = await createPayments(1);
    await payInOneBlock(devnet, clients, receiving, gross, 1);
    await waitForwarded(service, key, first);
  }

  log(`${kind}: creating ${count} live payments of ${AMOUNT} USDC to ${receiving}`);
  const ids = await createPayments(count);
  const treasury = devnet.accounts.treasury.address;
  const [treasuryBefore, settledBefore, receivingBefore] = await Promise.all([
    clients.usdcBalance(treasury),
    clients.usdcBalance(settlementAddress),
    clients.usdcBalance(receiving),
  ]);
  log(`${kind}: paying all ${count} in one block, then waiting for them to be forwarded`);
  const paid = await payInOneBlock(devnet, clients, receiving, gross, count);
  const forwarded = await waitForwarded(service, key, ids);

  const latencies: number[] = [];
  const usedTransfers = new Set<string>();
  const settlementTxs = new Set<string>();
  const paidHashes = new Set(paid.hashes.map((h) => h.toLowerCase()));
  for (const { at, payment } of forwarded.values()) {
    const tx = payment.txHash?.toLowerCase();
    if (!tx || !paidHashes.has(tx) || usedTransfers.has(tx))
      throw new Error(`payment ${payment.id} forwarded by ${payment.txHash}, not one transfer of its own`);
    usedTransfers.add(tx);
    const legs = payment.settlementTxHashes;
    if (!legs?.net || !legs.fee) throw new Error(`payment ${payment.id} forwarded without settlement hashes`);
    settlementTxs.add(legs.net).add(legs.fee);
    // All transfers are in one block: each payment's latency counts from that block.
    latencies.push(at - paid.minedAt);
  }
  const wallMs = Math.max(...latencies);

  const netTotal = (await clients.usdcBalance(settlementAddress)) - settledBefore;
  const feeTotal = (await clients.usdcBalance(treasury)) - treasuryBefore;
  const left = await clients.usdcBalance(receiving);
  const n = BigInt(count);
  if (netTotal !== net * n || feeTotal !== fee * n || left !== receivingBefore)
    throw new Error(
      `${kind}: settlement address got ${netTotal} (expected ${net * n}), treasury ${feeTotal} (expected ${fee * n}), ${left} left on ${receiving} (expected ${receivingBefore})`,
    );
  log(`${kind}: ${count} forwarded in ${wallMs.toFixed(0)} ms; balances exact`);
  return {
    kind,
    payments: count,
    wallMs,
    settlementsPerSecond: (count / wallMs) * 1000,
    latency: summarize(latencies),
    netTotal,
    feeTotal,
    settlementTransactions: settlementTxs.size,
  };
}

// ---------------------------------------------------------------------------------------------

export interface SettlementBenchFigures {
  config: Record<string, string>;
  scenarios: ScenarioFigures[];
}

export async function benchSettlement(): Promise<SettlementBenchFigures> {
  const count = envInt("BENCH_SETTLEMENT_PAYMENTS", QUICK ? 5 : 40);
  const warmUp = process.env.BENCH_SETTLEMENT_WARMUP !== "0";
  try {
    // As test/smart-wallets/live.test.ts configures the service.
    const env = await startDevnetService("settlement", BLOCK_TIME_MS, steps, log);
    const { live } = env;

    const scenarios: ScenarioFigures[] = [];
    try {
      for (const kind of ["eoa", "smart_wallet"] as const)
        scenarios.push(await scenario(env, kind, count, warmUp));
    } catch (err) {
      // What the service logged (warn and up) usually says why.
      log(`the service's last output:\n${env.service.output().slice(-3000)}`);
      throw err;
    }
    return {
      config: {
        payments: `${count} × ${AMOUNT} USDC per scenario, one workspace each, paid in one block`,
        LIVE_CONFIRMATIONS: live.LIVE_CONFIRMATIONS ?? "",
        LIVE_POLL_INTERVAL_MS: live.LIVE_POLL_INTERVAL_MS ?? "",
        devnet: `automine + a block every ${BLOCK_TIME_MS} ms`,
        bundler: "Alto, standard send (no LIVE_BUNDLER_INSTANT_BUNDLING, as the tests)",
        service: "node src/main.ts, embedded PGlite under DATA_DIR",
        poll: `GET /api/v1/payments every ${POLL_MS} ms`,
        "warm-up": warmUp
          ? "one payment per workspace settled before the measured batch (deploys the smart wallet)"
          : "none (BENCH_SETTLEMENT_WARMUP=0: the batch meets an undeployed smart wallet)",
      },
      scenarios,
    };
  } finally {
    await steps.cleanupAll();
  }
}

export function renderSettlementTable(f: SettlementBenchFigures): string {
  const ms = (n: number) => n.toFixed(0);
  const usdc = (n: bigint) => formatUnits(n, TOKEN_DECIMALS);
  const label = (kind: WalletKind) =>
    kind === "eoa" ? "Workspace EOA (two signed transfers each)" : "Smart wallet (sponsored user operations)";
  const rows = f.scenarios.map(
    (s) =>
      `| ${label(s.kind)} | ${s.payments} | ${ms(s.wallMs)} | ${s.settlementsPerSecond.toFixed(1)} | ${ms(s.latency.p50)} | ${ms(s.latency.p99)} | ${s.settlementTransactions} | ${usdc(s.netTotal)} | ${usdc(s.feeTotal)} |`,
  );
  const lines = f.scenarios.map(
    (s) =>
      `${label(s.kind)}: ${s.payments} forwarded ${ms(s.wallMs)} ms after the payers' block (${s.settlementsPerSecond.toFixed(1)} settlements/s); per payment p50 ${ms(s.latency.p50)} ms, p99 ${ms(s.latency.p99)} ms, min ${ms(s.latency.min)} ms, max ${ms(s.latency.max)} ms; net and fee exact.`,
  );
  return [
    `| Settlement from${QUICK_TAG} | Payments | Wall ms (block → last forwarded) | Settlements/s | p50 ms | p99 ms | Settlement txs | Net to merchant (USDC) | Fee to treasury (USDC) |`,
    "| :-- | --: | --: | --: | --: | --: | --: | --: | --: |",
    ...rows,
    "",
    ...lines,
    "",
    "No goal is set for settlement (issue 43 keeps none): the figures are for reference; the balances are checked exact.",
    "",
    `Configuration: ${Object.entries(f.config)
      .map(([k, v]) => `${k} ${v}`)
      .join("; ")}.`,
  ].join("\n");
}

await runAsScript(
  import.meta.url,
  log,
  async () => {
    const figures = await benchSettlement();
    process.stdout.write(
      `\n${renderSettlementTable(figures)}\n\nDevnet (Hardhat node + Alto bundler), service and bench on one 2-core machine shared with other processes.\n${QUICK ? `\n${QUICK_NOTE}\n` : ""}`,
    );
  },
  steps,
);
