import { randomBytes } from "node:crypto";
import autocannon from "autocannon";
import { erc20Abi } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { rpc, startDevnet } from "../src/devnet/chain.ts";
import { bearer, createWorkspace, startTestApp } from "../test/support/app.ts";
import { devnetClients } from "../test/support/devnet-clients.ts";
import { liveNetworkEnv } from "../test/support/devnet-env.ts";
import { liveGoal, type PayoutBenchFigures, renderPayoutTable, sandboxGoal } from "./payouts-report.ts";
import { type CpuPerUnit, cpuWindow } from "./proc-stats.ts";
import { type PostgresServer, startPostgresServer, startService } from "./service-process.ts";
import {
  cleanups,
  dig,
  envInt,
  type LatencySummary,
  postJson,
  QUICK,
  QUICK_NOTE,
  runAsScript,
  summarize,
} from "./support.ts";

// Payout throughput.
// (a) Sandbox: `POST /api/v1/payouts` against the service run as a child process (`node src/main.ts`)
//     on a throw-away PostgreSQL (scripts/local-postgres.sh), 50 workspaces funded through the
//     sandbox faucet, autocannon cycling over their 50 keys. Goal (issue 43) ≥ 3,000 payouts/s at
//     32 connections.
// (b) Live: 100 concurrent payouts from ONE workspace EOA on a devnet with automine only (a block per
//     transaction, no interval mining), in-process app, after an unmeasured warm-up batch of the
//     same size. Next to it, the node's own figure, measured in the same run: the devnet payer
//     sends 100 USDC transfers itself, one after another in nonce order, before the payouts (the
//     app idle) and after them, the better of the two. Goal (issue 43): the payouts/s ≥ 75% of
//     the node's transfers/s.
// (b') The same with ETH payouts (each one reads its recipient's code first). No goal.
// (c) Live with blocks every second and no automine (how a real chain behaves): the same 100
//     payouts. One at a time, each waiting for its receipt, they would take 100 blocks; the
//     wallet's nonce pipeline puts many in each block. No goal: it shows the pipeline.
// All scenarios share one PostgreSQL server. The goals and the table: bench/payouts-report.ts.
//
// `node bench/payouts.ts` prints a markdown table. Environment: BENCH_PAYOUTS_SCENARIOS (which
// to run, comma-separated: sandbox (a), live (b), eth (b'), blocks (c); default all of them),
// BENCH_PAYOUTS_DURATION (measured seconds of (a), default 10), BENCH_PAYOUTS_WARMUP (default 2),
// BENCH_PAYOUTS_CONNECTIONS (default 32), BENCH_PAYOUTS_WORKSPACES (of (a), default 50),
// BENCH_PAYOUTS_LIVE (payouts of (b), (b') and (c), default 100). BENCH_QUICK=1: (a) 2 s after a
// 1 s warm-up over 10 workspaces, 20 live payouts (an explicit setting still wins).

const DESTINATION = "0x2222222222222222222222222222222222222222";
const SETTLEMENT_ADDRESS = "0x1111111111111111111111111111111111111111";
const SCENARIOS = ["sandbox", "live", "eth", "blocks"] as const;
type ScenarioName = (typeof SCENARIOS)[number];

/** BENCH_PAYOUTS_SCENARIOS: the scenarios to run, in their order (default all). */
function chosenScenarios(): Set<ScenarioName> {
  const raw = process.env.BENCH_PAYOUTS_SCENARIOS?.trim();
  if (!raw) return new Set(SCENARIOS);
  const names = raw.split(",").map((name) => name.trim());
  for (const name of names)
    if (!(SCENARIOS as readonly string[]).includes(name))
      throw new Error(`BENCH_PAYOUTS_SCENARIOS: "${name}" is not one of ${SCENARIOS.join(", ")}`);
  return new Set(names as ScenarioName[]);
}

const log = (message: string) => process.stderr.write(`[bench:payouts] ${message}\n`);

const steps = cleanups(log);
const { defer } = steps;

// ---------------------------------------------------------------------------------------------
// (a) Sandbox

export interface SandboxFigures {
  connections: number;
  workspaces: number;
  seconds: number;
  /** Mean of autocannon's per-second samples. */
  requestsPerSecond: number;
  /** 2xx answers over the measured window / its length. */
  payoutsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  requests: number;
  failed: number;
  /** CPU per payout (this process: autocannon), and how busy the machine was: is it at its limit? */
  cpu: CpuPerUnit;
  serviceLogLines: string[];
}

async function sandboxScenario(pg: PostgresServer): Promise<SandboxFigures> {
  const databaseUrl = pg.url;
  const connections = envInt("BENCH_PAYOUTS_CONNECTIONS", 32);
  const seconds = envInt("BENCH_PAYOUTS_DURATION", QUICK ? 2 : 10);
  const warmup = envInt("BENCH_PAYOUTS_WARMUP", QUICK ? 1 : 2, 0);
  const workspaces = envInt("BENCH_PAYOUTS_WORKSPACES", QUICK ? 10 : 50);
  const adminSecret = randomBytes(24).toString("hex");
  const service = await startService("payouts", steps, {
    databaseUrl,
    adminSecret,
    env: { RATE_LIMIT_SANDBOX: "10000000" },
  });

  log(`creating and funding ${workspaces} sandbox workspaces`);
  const keys: string[] = [];
  for (let i = 0; i < workspaces; i++) {
    const created = await postJson(
      `${service.base}/api/v1/workspaces`,
      { name: `Payout bench ${i}`, settlementAddress: SETTLEMENT_ADDRESS },
      { authorization: `Bearer ${adminSecret}` },
    );
    const key = dig(created.json, "apiKeys", "test", "key");
    if (created.status !== 201 || typeof key !== "string")
      throw new Error(`workspace creation failed: ${created.status} ${JSON.stringify(created.json)}`);
    const funded = await postJson(
      `${service.base}/api/v1/sandbox/faucet`,
      { tokenSymbol: "USDC", amount: "1000000" },
      { authorization: `Bearer ${key}` },
    );
    if (funded.status >= 300)
      throw new Error(`faucet failed: ${funded.status} ${JSON.stringify(funded.json)}`);
    keys.push(key);
  }
  const body = JSON.stringify({ tokenSymbol: "USDC", amount: "0.01", destinationAddress: DESTINATION });
  const probe = await postJson(`${service.base}/api/v1/payouts`, JSON.parse(body), {
    authorization: `Bearer ${keys[0]}`,
  });
  if (probe.status !== 200)
    throw new Error(`sandbox payout failed: ${probe.status} ${JSON.stringify(probe.json)}`);

  let next = 0;
  const run = (duration: number) =>
    autocannon({
      url: service.base,
      connections,
      pipelining: 1,
      duration,
      timeout: 30,
      requests: [
        {
          method: "POST",
          path: "/api/v1/payouts",
          setupRequest: (request) => {
            const key = keys[next++ % keys.length];
            return {
              ...request,
              headers: { "content-type": "application/json", authorization: `Bearer ${key}` },
              body,
            };
          },
        },
      ],
    });
  if (warmup > 0) {
    log(`warm-up ${warmup} s`);
    await run(warmup);
  }
  log(`measuring ${seconds} s at ${connections} connections`);
  const window = cpuWindow(service.pid, pg.dir);
  window.open();
  const result = await run(seconds);
  const cpu = window.close(result["2xx"]);
  const failed = result.non2xx + result.errors + result.timeouts;
  log(
    `sandbox: ${(result["2xx"] / result.duration).toFixed(0)} payouts/s, p50 ${result.latency.p50} ms, p99 ${result.latency.p99} ms, ${failed} failed`,
  );
  return {
    connections,
    workspaces,
    seconds,
    requestsPerSecond: result.requests.average,
    payoutsPerSecond: result["2xx"] / result.duration,
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    requests: result.requests.total,
    failed,
    cpu,
    serviceLogLines: [...service.tail],
  };
}

// ---------------------------------------------------------------------------------------------
// (b) Live, one wallet, automine

export interface LiveFigures {
  payouts: number;
  succeeded: number;
  wallMs: number;
  payoutsPerSecond: number;
  latency: LatencySummary;
  /**
   * The node alone: the payer sends the same number of USDC transfers, one after another in nonce
   * order; the better of a run before the payouts and one after them.
   */
  nodeTransfersPerSecond: number;
  nodeWallMs: number;
  database: string;
  /** Blocks the payouts' transactions landed in. */
  blocks: number;
  /**
   * CPU time of this process (the in-process app and the requests made to it) over the measured
   * window, per payout, and how many cores that kept busy: where the time goes on a 2-core machine
   * that the devnet and PostgreSQL share.
   */
  cpuMsPerPayout: number;
  cores: number;
}

async function liveScenario(
  databaseUrl: string | undefined,
  mining: { automine: true } | { automine: false; blockTimeMs: number },
  token: "USDC" | "ETH" = "USDC",
): Promise<LiveFigures> {
  const count = envInt("BENCH_PAYOUTS_LIVE", QUICK ? 20 : 100);
  log(
    mining.automine
      ? "starting the devnet (automine only)"
      : `starting the devnet (a block every ${mining.blockTimeMs} ms)`,
  );
  const devnet = await startDevnet({ blockTimeMs: mining.automine ? 0 : mining.blockTimeMs });
  defer("devnet", () => devnet.stop());
  // startTestApp creates a database of its own on the server of DATABASE_URL, PGlite without it.
  const previous = process.env.DATABASE_URL;
  if (databaseUrl) process.env.DATABASE_URL = databaseUrl;
  const t = await startTestApp(liveNetworkEnv(devnet)).finally(() => {
    if (previous === undefined) delete process.env.DATABASE_URL;
    else process.env.DATABASE_URL = previous;
  });
  defer("in-process app", () => t.close());

  const { chain, payer, credit } = devnetClients(devnet);
  const ws = await createWorkspace(t);
  await credit(ws.eoaAddress, { USDC: "1000", ETH: "5" });

  const payout = () =>
    t.request({
      method: "POST",
      url: "/api/v1/payouts",
      headers: bearer(ws.liveKey),
      payload: {
        tokenSymbol: token,
        amount: token === "ETH" ? "0.0001" : "0.01",
        destinationAddress: DESTINATION,
      },
    });
  /**
   * The node's own figure: the same count of USDC transfers from the payer, nonces assigned up
   * front; their wall time. With automine the node refuses a nonce above the next expected one
   * ("transactions can't be queued when automining"), so one account's transactions must reach it
   * in order: each is sent once the previous one has been accepted (and mined), as a single
   * wallet must.
   */
  const nodeAlone = async (n: number): Promise<number> => {
    const first = await chain.getTransactionCount({ address: payer.account.address, blockTag: "pending" });
    const gas = await chain.estimateContractGas({
      address: devnet.tokens.USDC,
      abi: erc20Abi,
      functionName: "transfer",
      args: [privateKeyToAccount(generatePrivateKey()).address, 10_000n],
      account: payer.account,
    });
    const nodeStarted = performance.now();
    const hashes: `0x${string}`[] = [];
    for (let i = 0; i < n; i++) {
      hashes.push(
        await payer.writeContract({
          address: devnet.tokens.USDC,
          abi: erc20Abi,
          functionName: "transfer",
          args: [DESTINATION, 10_000n],
          nonce: first + i,
          gas: gas * 2n,
        }),
      );
    }
    await Promise.all(hashes.map((hash) => chain.waitForTransactionReceipt({ hash, pollingInterval: 50 })));
    return performance.now() - nodeStarted;
  };
  // Measured first while the app is idle, and again after the payouts (below), USDC with automine only.
  const measureNode = mining.automine && token === "USDC";
  if (measureNode) log(`${count} USDC transfers from one account sent directly to the node, in nonce order`);
  const nodeBefore = measureNode ? await nodeAlone(count) : Number.NaN;

  // Warm-up, not measured (as the autocannon scenarios discard their first seconds): two payouts
  // one after the other, then one concurrent batch like the measured one, so that the measured
  // batch runs compiled code and warm connections rather than the first calls of each path.
  for (let i = 0; i < 2; i++) {
    const warm = await payout();
    if (warm.statusCode !== 200) throw new Error(`live payout failed: ${warm.statusCode} ${warm.body}`);
  }
  const warmBatch = await Promise.all(Array.from({ length: count }, () => payout()));
  const warmFailed = warmBatch.find((r) => r.statusCode !== 200);
  if (warmFailed) throw new Error(`live payout failed: ${warmFailed.statusCode} ${warmFailed.body}`);

  if (!mining.automine) await rpc(devnet.rpcUrl, "evm_setAutomine", [false]);
  log(`${count} concurrent live payouts from one wallet`);
  const latencies: number[] = [];
  const cpuBefore = process.cpuUsage();
  const started = performance.now();
  const responses = await Promise.all(
    Array.from({ length: count }, async () => {
      const begin = performance.now();
      const res = await payout();
      latencies.push(performance.now() - begin);
      return res;
    }),
  );
  const wallMs = performance.now() - started;
  const cpu = process.cpuUsage(cpuBefore);
  const cpuMs = (cpu.user + cpu.system) / 1000;
  log(`live: ${count} payouts in ${wallMs.toFixed(0)} ms = ${((count / wallMs) * 1000).toFixed(1)}/s`);
  const succeeded = responses.filter(
    (r) => r.statusCode === 200 && r.json().payout?.status === "completed",
  ).length;
  if (succeeded < count) {
    const bad = responses.find((r) => r.statusCode !== 200);
    if (bad) log(`a failed payout: ${bad.statusCode} ${bad.body.slice(0, 500)}`);
  }
  const blockNumbers = await Promise.all(
    responses
      .filter((r) => r.statusCode === 200)
      .map(async (r) => (await chain.getTransactionReceipt({ hash: r.json().payout.txHash })).blockNumber),
  );
  const blocks = new Set(blockNumbers).size;
  const database = databaseUrl ? "PostgreSQL (throw-away server)" : "PGlite in memory";
  // ETH payouts are measured for the service alone (each one reads its recipient's code first).
  if (!mining.automine || token === "ETH") {
    const latency = summarize(latencies);
    return {
      payouts: count,
      succeeded,
      wallMs,
      payoutsPerSecond: (succeeded / wallMs) * 1000,
      latency,
      nodeTransfersPerSecond: Number.NaN,
      nodeWallMs: Number.NaN,
      database,
      blocks,
      cpuMsPerPayout: cpuMs / count,
      cores: cpuMs / wallMs,
    };
  }

  // The node's own figure: the better of its two runs, so that work the app is still finishing
  // (its workers, the events of the payouts just made) cannot lower the reference.
  log(`${count} USDC transfers from one account sent directly to the node, in nonce order (again)`);
  const nodeWallMs = Math.min(nodeBefore, await nodeAlone(count));
  log(`the node alone: ${nodeBefore.toFixed(0)} ms before the payouts, ${nodeWallMs.toFixed(0)} ms at best`);

  return {
    payouts: count,
    succeeded,
    wallMs,
    payoutsPerSecond: (succeeded / wallMs) * 1000,
    latency: summarize(latencies),
    nodeTransfersPerSecond: (count / nodeWallMs) * 1000,
    nodeWallMs,
    database,
    blocks,
    cpuMsPerPayout: cpuMs / count,
    cores: cpuMs / wallMs,
  };
}

// ---------------------------------------------------------------------------------------------

export async function benchPayouts(): Promise<PayoutBenchFigures> {
  const chosen = chosenScenarios();
  try {
    const pg = await startPostgresServer("payouts", steps, log);
    const databaseUrl = pg.url;
    const f: PayoutBenchFigures = { goals: [] };
    if (chosen.has("sandbox")) f.sandbox = await sandboxScenario(pg);
    if (chosen.has("live")) f.live = await liveScenario(databaseUrl, { automine: true });
    if (chosen.has("eth")) f.liveEth = await liveScenario(databaseUrl, { automine: true }, "ETH");
    if (chosen.has("blocks"))
      f.liveBlocks = await liveScenario(databaseUrl, { automine: false, blockTimeMs: 1000 });
    if (f.sandbox) f.goals.push(sandboxGoal(f.sandbox));
    if (f.live) f.goals.push(liveGoal(f.live));
    return f;
  } finally {
    await steps.cleanupAll();
  }
}

await runAsScript(
  import.meta.url,
  log,
  async () => {
    const figures = await benchPayouts();
    if (figures.sandbox && figures.sandbox.serviceLogLines.length > 0)
      log(
        `the service logged at warn or above; last lines:\n${figures.sandbox.serviceLogLines.slice(-5).join("\n")}`,
      );
    process.stdout.write(
      `\n${renderPayoutTable(figures)}\n\n${machineNote()}\n${QUICK ? `\n${QUICK_NOTE}\n` : ""}`,
    );
  },
  steps,
);

function machineNote(): string {
  return "Other processes share this 2-core machine; load generator, service, PostgreSQL and the devnet all run on it.";
}
