import os from "node:os";
import type { PaymentPayload, PaymentRequirements } from "@x402/core/types";
import { type Address, createPublicClient, http } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { SANDBOX_A } from "../src/chain/simulated/networks.ts";
import { startDevnet, USDC_EIP712 } from "../src/devnet/chain.ts";
import { createWorkers } from "../src/workers.ts";
import { createWorkspace, startTestApp, type TestApp } from "../test/support/app.ts";
import { creditToken } from "../test/support/devnet-credit.ts";
import { liveNetworkEnv } from "../test/support/devnet-env.ts";
import { until } from "../test/support/poll.ts";
import { paidResource, payingFetch, signedPayment } from "../test/support/x402.ts";
import { machineTicks, TICKS_PER_SECOND } from "./proc-stats.ts";
import { startPostgres } from "./service-process.ts";
import {
  cleanups,
  dig,
  envInt,
  type LatencySummary,
  postJson,
  QUICK,
  QUICK_NOTE,
  QUICK_TAG,
  runAsScript,
  summarize,
} from "./support.ts";
import {
  NETWORK_A,
  type PaidFigures,
  PRICE,
  payingLoad,
  recoveryCpuMs,
  SANDBOX_USDC,
  type ServicePaidFigures,
  serviceScenario,
} from "./x402-paid.ts";

// The x402 v2 facilitator (`node bench/x402.ts [--pg]`, BENCH_QUICK=1 for a short run):
// (1) verify latency: sequential POST /api/v1/x402/verify over 127.0.0.1 with a sandbox key, each a
//     fresh payload signed before the clock starts. Goal p50 < 5 ms.
// (2) paid requests/s: an Express resource behind the stock @x402/express middleware pointed at the
//     service (verify, then settle on the sandbox's ledger), CONCURRENCY clients paying through the
//     stock @x402/fetch wrapper, each with its own payer. Goal ≥ 200/s. The clients' signing, the
//     resource and the service share this one process and its event loop: the clients' signing CPU
//     is measured on its own and printed beside the figure.
// (2') the same with the service as it is deployed, in a process of its own (`node src/main.ts`) on a
//     throw-away PostgreSQL, the clients and the resource in this process (bench/x402-paid.ts).
//     Goal ≥ 200/s; CPU per paid request of each process printed beside it.
// (3) devnet: sequential POST /api/v1/x402/settle with a live key, each timed from the call until
//     GET /api/v1/payments/{id} (polled every POLL_MS) says `forwarded`; workers running, the
//     facilitator wallet's gas from the gas top-up job. No goal; where the time goes is printed.
// The app runs in this process (test/support/app.ts): in-memory PGlite, or PostgreSQL when
// DATABASE_URL is set or with --pg (a throw-away server, scripts/local-postgres.sh).
// Environment: BENCH_X402_VERIFIES (2,000; quick 300), BENCH_X402_SECONDS (10; quick 3),
// BENCH_X402_CONCURRENCY (32), BENCH_X402_SETTLES (30; quick 5).

const GOALS = { verifyP50Ms: 5, paidPerSecond: 200 };
const USDC = 1_000_000n;
const POLL_MS = 20;
const FORWARD_TIMEOUT_MS = 120_000;

const log = (message: string) => process.stderr.write(`[bench:x402] ${message}\n`);
const sleep = (ms: number) => new Promise<void>((done) => setTimeout(done, ms));
const steps = cleanups(log);
const { defer } = steps;

/** Busy CPU time of the whole machine so far, in ms (/proc/stat; 0 where there is none). */
const machineBusyMs = (): number => (machineTicks().busy * 1000) / TICKS_PER_SECOND;

/** Measures a window: this process's CPU and the rest of the machine's, both in cores. */
function cpuWindow() {
  const own = process.cpuUsage();
  const busy = machineBusyMs();
  const started = performance.now();
  return () => {
    const ms = performance.now() - started;
    const used = process.cpuUsage(own);
    const ownMs = (used.user + used.system) / 1000;
    return { ms, ownMs, ownCores: ownMs / ms, otherCores: Math.max(0, machineBusyMs() - busy - ownMs) / ms };
  };
}

const auth = (key: string) => ({ authorization: `Bearer ${key}` });

function requirements(network: string, asset: string, payTo: string, extra: object): PaymentRequirements {
  return {
    scheme: "exact",
    network: network as `${string}:${string}`,
    asset,
    amount: PRICE.toString(),
    payTo,
    maxTimeoutSeconds: 120,
    extra: { ...extra },
  };
}

/** Signs `count` payloads with `key` for `accepted`; they and the signing time per payload. */
async function presign(key: `0x${string}`, accepted: PaymentRequirements, count: number) {
  const payloads: PaymentPayload[] = [];
  const cpu = process.cpuUsage();
  const started = performance.now();
  for (let i = 0; i < count; i++) payloads.push(await signedPayment(key, accepted));
  const used = process.cpuUsage(cpu);
  return {
    payloads,
    wallMsPer: (performance.now() - started) / count,
    cpuMsPer: (used.user + used.system) / 1000 / count,
  };
}

async function creditSandbox(t: TestApp, address: string, amount: bigint) {
  await t.app.services.ledger.credit({
    network: SANDBOX_A.id,
    address,
    token: "USDC",
    amount,
    reference: `bench-x402-payer:${address}`,
  });
}

// ---------------------------------------------------------------------------------------------
// (1) and (2): sandbox

export interface SandboxFigures extends PaidFigures {
  verifies: number;
  verify: LatencySummary;
  signCpuMs: number;
  signWallMs: number;
  /** CPU per signature recovery as @x402/evm's verify does it (recoveryCpuMs), measured alone. */
  recoverCpuMs: number;
  /** This process's CPU per verify (client and service), and other processes' over the window, in cores. */
  verifyCpuMs: number;
  verifyOtherCores: number;
  /** This process's CPU over the paid window, in cores and per paid request, and the clients' share of it (signing). */
  cpuCores: number;
  paidCpuMs: number;
  paidOtherCores: number;
  clientSignShare: number;
}

async function sandbox(): Promise<SandboxFigures> {
  const verifies = envInt("BENCH_X402_VERIFIES", QUICK ? 300 : 2_000);
  const seconds = envInt("BENCH_X402_SECONDS", QUICK ? 3 : 10);
  const concurrency = envInt("BENCH_X402_CONCURRENCY", 32);
  const t = await startTestApp({ RATE_LIMIT_SANDBOX: "10000000" });
  const closeApp = defer("sandbox app", () => t.close());
  const serviceUrl = await t.app.http.listen({ port: 0, host: "127.0.0.1" });
  const ws = await createWorkspace(t, { name: "x402 bench (sandbox)" });

  // (1) verify
  const payerKey = generatePrivateKey();
  await creditSandbox(t, privateKeyToAccount(payerKey).address, 1_000n * USDC);
  const accepted = requirements(NETWORK_A, SANDBOX_USDC, ws.eoaAddress, { name: "USDC", version: "2" });
  const warmUp = 50;
  log(`signing ${verifies + warmUp} payloads`);
  const signed = await presign(payerKey, accepted, verifies + warmUp);
  // 200 in a quick run too (0.4 s): fewer stop before the JIT has warmed and read high.
  const recoverCpuMs = await recoveryCpuMs(signed.payloads.slice(0, 200));
  const verifyUrl = `${serviceUrl}/api/v1/x402/verify`;
  const verifyOnce = async (paymentPayload: PaymentPayload) => {
    const res = await postJson(
      verifyUrl,
      { x402Version: 2, paymentPayload, paymentRequirements: accepted },
      auth(ws.testKey),
    );
    if (res.status !== 200 || dig(res.json, "isValid") !== true)
      throw new Error(`verify answered ${res.status}: ${JSON.stringify(res.json).slice(0, 300)}`);
  };
  for (const payload of signed.payloads.slice(0, warmUp)) await verifyOnce(payload);
  log(`${verifies} sequential verifies`);
  const verifyMs: number[] = [];
  const verifyWindow = cpuWindow();
  for (const payload of signed.payloads.slice(warmUp)) {
    const started = performance.now();
    await verifyOnce(payload);
    verifyMs.push(performance.now() - started);
  }
  const verifyCpu = verifyWindow();

  // (2) paid requests through the stock middleware and fetch wrapper
  const resource = await paidResource(serviceUrl, ws.testKey, {
    network: NETWORK_A,
    asset: SANDBOX_USDC,
    amount: PRICE.toString(),
    payTo: ws.eoaAddress,
  });
  const closeResource = defer("paid resource", () => resource.close());
  const payers = Array.from({ length: concurrency }, () => generatePrivateKey());
  for (const key of payers) await creditSandbox(t, privateKeyToAccount(key).address, 1_000n * USDC);
  const fetches = payers.map((key) => payingFetch(key, { network: NETWORK_A, asset: SANDBOX_USDC }));
  let paidWindow = cpuWindow();
  const load = await payingLoad(resource.url, fetches, seconds, log, () => {
    paidWindow = cpuWindow();
  });
  const { latencies, failed } = load;
  const paidCpu = paidWindow();

  // Every paid request moved exactly PRICE from its payer on the ledger.
  let spent = 0n;
  for (const key of payers)
    spent +=
      1_000n * USDC -
      (await t.app.services.ledger.balance(SANDBOX_A.id, privateKeyToAccount(key).address, "USDC"));
  // (The warm-up's requests count; a failed request may or may not have been settled.)
  const expected = BigInt(latencies.length + concurrency) * PRICE;
  if (failed === 0 && spent !== expected)
    throw new Error(`payers spent ${spent}, expected ${expected} (paid requests × price)`);
  await closeResource();
  await closeApp();

  return {
    verifies,
    verify: summarize(verifyMs),
    signCpuMs: signed.cpuMsPer,
    signWallMs: signed.wallMsPer,
    recoverCpuMs,
    concurrency,
    seconds: paidCpu.ms / 1000,
    paid: latencies.length,
    failed,
    paidPerSecond: (latencies.length / paidCpu.ms) * 1000,
    paidLatency: summarize(latencies),
    verifyCpuMs: verifyCpu.ownMs / verifies,
    verifyOtherCores: verifyCpu.otherCores,
    cpuCores: paidCpu.ownCores,
    paidCpuMs: paidCpu.ownMs / Math.max(1, latencies.length),
    paidOtherCores: paidCpu.otherCores,
    clientSignShare: (signed.cpuMsPer * latencies.length) / paidCpu.ownMs,
  };
}

// ---------------------------------------------------------------------------------------------
// (3): devnet

export interface DevnetFigures {
  settles: number;
  gasWaitMs: number;
  settleCall: LatencySummary;
  forwarded: LatencySummary;
  /** Per status the payment was seen in, from the settle call to first seeing it (p50). */
  statusP50: Record<string, number>;
}

async function devnetScenario(): Promise<DevnetFigures> {
  const settles = envInt("BENCH_X402_SETTLES", QUICK ? 5 : 30);
  log("starting the devnet");
  const devnet = await startDevnet();
  defer("devnet", () => devnet.stop());
  const t = await startTestApp(liveNetworkEnv(devnet));
  defer("live app", () => t.close());
  const serviceUrl = await t.app.http.listen({ port: 0, host: "127.0.0.1" });
  const ws = await createWorkspace(t, { name: "x402 bench (devnet)" });
  const payerKey = generatePrivateKey();
  await creditToken(devnet, "USDC", privateKeyToAccount(payerKey).address, "1000");
  const supported = await fetch(`${serviceUrl}/api/v1/x402/supported`, { headers: auth(ws.liveKey) });
  const signer = dig(await supported.json(), "signers", "eip155:*", "0");
  if (typeof signer !== "string") throw new Error("GET /api/v1/x402/supported named no signer");
  // The wallet exists once /supported named it: the gas top-up job's first run (at start) funds it,
  // rather than its next a minute later.
  const workers = createWorkers(t.app, { dispatcher: { pollIntervalMs: 50 } });
  workers.start();
  defer("workers", () => workers.stop());
  const chain = createPublicClient({ chain: devnet.chain, transport: http(devnet.rpcUrl) });
  log(`waiting for the gas top-up job to fund the facilitator wallet ${signer}`);
  const gasStarted = performance.now();
  await until(
    "the facilitator wallet's gas",
    () => chain.getBalance({ address: signer as Address }),
    (b) => b > 0n,
    60_000,
    50,
  );
  const gasWaitMs = performance.now() - gasStarted;

  const accepted = requirements(`eip155:${devnet.chainId}`, devnet.tokens.USDC, ws.eoaAddress, USDC_EIP712);
  const { payloads } = await presign(payerKey, accepted, settles + 1);
  const settleUrl = `${serviceUrl}/api/v1/x402/settle`;
  const one = async (paymentPayload: PaymentPayload) => {
    const started = performance.now();
    const res = await postJson(
      settleUrl,
      { x402Version: 2, paymentPayload, paymentRequirements: accepted },
      auth(ws.liveKey),
    );
    const settleMs = performance.now() - started;
    const id = dig(res.json, "extra", "paymentId");
    if (res.status !== 200 || dig(res.json, "success") !== true || typeof id !== "string")
      throw new Error(`settle answered ${res.status}: ${JSON.stringify(res.json).slice(0, 300)}`);
    const seen: Record<string, number> = {};
    for (;;) {
      const got = await fetch(`${serviceUrl}/api/v1/payments/${id}`, { headers: auth(ws.liveKey) });
      const payment = dig(await got.json(), "payment");
      const status = String(dig(payment, "status"));
      seen[status] ??= performance.now() - started;
      if (status === "forwarded") return { settleMs, forwardedMs: seen[status], seen };
      if (status === "failed" || status === "expired")
        throw new Error(`payment ${id} ${status}: ${String(dig(payment, "failureReason"))}`);
      if (performance.now() - started > FORWARD_TIMEOUT_MS) throw new Error(`payment ${id} still ${status}`);
      await sleep(POLL_MS);
    }
  };
  const [first, ...measured] = payloads;
  if (!first) throw new Error("nothing signed");
  log("warm-up: one settle, unmeasured");
  await one(first);
  log(`${settles} sequential settles, each until forwarded`);
  const results: Awaited<ReturnType<typeof one>>[] = [];
  for (const payload of measured) results.push(await one(payload));

  const statuses = [...new Set(results.flatMap((r) => Object.keys(r.seen)))];
  const statusP50: Record<string, number> = {};
  for (const status of statuses)
    statusP50[status] = summarize(
      results.flatMap((r) => (r.seen[status] === undefined ? [] : [r.seen[status]])),
    ).p50;
  return {
    settles,
    gasWaitMs,
    settleCall: summarize(results.map((r) => r.settleMs)),
    forwarded: summarize(results.map((r) => r.forwardedMs)),
    statusP50,
  };
}

// ---------------------------------------------------------------------------------------------

function render(db: string, s: SandboxFigures, p: ServicePaidFigures, d: DevnetFigures): string {
  const ms = (n: number) => n.toFixed(n < 10 ? 2 : 0);
  const met = (ok: boolean) => (ok ? "**met**" : "**not met**");
  const verifyOk = s.verify.p50 < GOALS.verifyP50Ms;
  const paidOk = s.paidPerSecond >= GOALS.paidPerSecond && s.failed === 0;
  const servicePaidOk = p.paidPerSecond >= GOALS.paidPerSecond && p.failed === 0;
  const order = Object.entries(d.statusP50).sort((a, b) => a[1] - b[1]);
  const cores = os.availableParallelism();
  const floorMs = p.benchCpuMs + 2 * s.recoverCpuMs;
  return [
    `x402 facilitator bench${QUICK_TAG}: app in this process on ${db}, HTTP over 127.0.0.1.`,
    "",
    "| Measure | Figure | Goal | Met |",
    "| :-- | :-- | :-- | :-- |",
    `| POST /x402/verify, sandbox, ${s.verifies} sequential | p50 ${ms(s.verify.p50)} ms, p99 ${ms(s.verify.p99)} ms (mean ${ms(s.verify.mean)}, max ${ms(s.verify.max)}) | p50 < ${GOALS.verifyP50Ms} ms | ${met(verifyOk)} |`,
    `| Paid requests, stock @x402/express + @x402/fetch, sandbox ledger, ${s.concurrency} clients, ${s.seconds.toFixed(1)} s | ${s.paidPerSecond.toFixed(0)}/s (${s.paid} paid, ${s.failed} failed); per request p50 ${ms(s.paidLatency.p50)} ms, p99 ${ms(s.paidLatency.p99)} ms | ≥ ${GOALS.paidPerSecond}/s | ${met(paidOk)} |`,
    `| Paid requests as above, the service in its own process on PostgreSQL, ${p.concurrency} clients, ${p.seconds.toFixed(1)} s | ${p.paidPerSecond.toFixed(0)}/s (${p.paid} paid, ${p.failed} failed); per request p50 ${ms(p.paidLatency.p50)} ms, p99 ${ms(p.paidLatency.p99)} ms | ≥ ${GOALS.paidPerSecond}/s | ${met(servicePaidOk)} |`,
    `| Devnet: settle → forwarded, ${d.settles} sequential | p50 ${ms(d.forwarded.p50)} ms, p99 ${ms(d.forwarded.p99)} ms; the settle call itself p50 ${ms(d.settleCall.p50)} ms, p99 ${ms(d.settleCall.p99)} ms | — | — |`,
    "",
    `Verify: ${ms(s.verifyCpuMs)} ms CPU of this process per verify (the HTTP client and the service); other processes used ${s.verifyOtherCores.toFixed(2)} cores meanwhile.`,
    `Paid requests: the clients (x402 signing ${ms(s.signCpuMs)} ms CPU per payload, measured alone), the Express resource and the service share this one process: it used ${s.cpuCores.toFixed(2)} cores over the window, ${ms(s.paidCpuMs)} ms CPU per paid request, the clients' signing ≈ ${(s.clientSignShare * 100).toFixed(0)}% of it; other processes used ${s.paidOtherCores.toFixed(2)} cores meanwhile. Each paid request is two GETs of the resource (402, then paid) and a verify and a settle of the facilitator.`,
    `Paid requests, service in its own process: CPU per paid request ${ms(p.serviceCpuMs)} ms in the service, ${ms(p.postgresCpuMs)} ms in PostgreSQL, ${ms(p.benchCpuMs)} ms in the bench's process (the clients' signing and the Express resource); ${ms(p.serviceCpuMs + p.postgresCpuMs + p.benchCpuMs)} ms in all, on ${cores} cores.`,
    `The stock packages' own share of that: the bench's process (stock @x402/fetch and @x402/express) ${ms(p.benchCpuMs)} ms, and inside the service two signature recoveries by @x402/evm (its verify, and the verify its settle repeats; viem, pure JS) at ${ms(s.recoverCpuMs)} ms each, measured alone: ${ms(floorMs)} ms per paid request. On ${cores} cores that alone allows at most ${((cores * 1000) / floorMs).toFixed(0)} paid/s, were our own code and PostgreSQL to cost nothing.`,
    `Devnet: startDevnet defaults (automine + a block every second), LIVE_CONFIRMATIONS=2, LIVE_POLL_INTERVAL_MS=100, workers running; GET /api/v1/payments/{id} polled every ${POLL_MS} ms. Status first seen (p50 from the settle call): ${order.map(([k, v]) => `${k} ${ms(v)} ms`).join(", ")}. The gas top-up funded the facilitator wallet ${ms(d.gasWaitMs)} ms after it was asked for.`,
  ].join("\n");
}

await runAsScript(
  import.meta.url,
  log,
  async () => {
    if (!process.env.DATABASE_URL && process.argv.includes("--pg"))
      process.env.DATABASE_URL = await startPostgres("x402", steps, log);
    const db = process.env.DATABASE_URL ? "PostgreSQL" : "in-memory PGlite";
    const s = await sandbox();
    const p = await serviceScenario(steps, log);
    const d = await devnetScenario();
    process.stdout.write(`\n${render(db, s, p, d)}\n${QUICK ? `\n${QUICK_NOTE}\n` : ""}`);
  },
  steps,
);
