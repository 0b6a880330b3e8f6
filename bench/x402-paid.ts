import { randomBytes } from "node:crypto";
import type { PaymentPayload } from "@x402/core/types";
import { type Hex, recoverTypedDataAddress } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { TRANSFER_WITH_AUTHORIZATION_TYPES } from "../src/chain/eip3009.ts";
import { SANDBOX_A } from "../src/chain/simulated/networks.ts";
import { paidResource, payingFetch } from "../test/support/x402.ts";
import { cpuWindow } from "./proc-stats.ts";
import { startPostgresServer, startService } from "./service-process.ts";
import { type Cleanups, dig, envInt, type LatencySummary, postJson, QUICK, summarize } from "./support.ts";

// Paid requests through the stock @x402/express middleware and @x402/fetch wrapper, against our
// facilitator on the sandbox's ledger (issue 40's paid/s goal). `payingLoad` drives the clients;
// `serviceScenario` runs it against the service as it is deployed: `node src/main.ts` in a process
// of its own on a throw-away PostgreSQL, the Express resource and the paying clients in this one.
// The payers get their USDC from the workspace by sandbox payouts (the faucet funds the workspace).

export const NETWORK_A = `eip155:${SANDBOX_A.chainId}` as const;
export const SANDBOX_USDC = SANDBOX_A.tokens.USDC as string;
/** 0.01 USDC per paid request. */
export const PRICE = 10_000n;
/** Each payer's USDC (whole tokens): more than a bench's worth of paid requests. */
const PAYER_USDC = 1_000;

/** Recovers a payload's signer as @x402/evm's verify does for an EOA (viem, pure JS); throws if it is not the payer. */
async function recoverPayer({ accepted, payload }: PaymentPayload): Promise<void> {
  const { authorization, signature } = payload as {
    authorization: Record<"from" | "to" | "value" | "validAfter" | "validBefore" | "nonce", string>;
    signature: Hex;
  };
  const recovered = await recoverTypedDataAddress({
    domain: {
      name: String(accepted.extra?.name),
      version: String(accepted.extra?.version),
      chainId: Number(accepted.network.split(":")[1]),
      verifyingContract: accepted.asset as Hex,
    },
    types: TRANSFER_WITH_AUTHORIZATION_TYPES,
    primaryType: "TransferWithAuthorization",
    message: {
      from: authorization.from as Hex,
      to: authorization.to as Hex,
      value: BigInt(authorization.value),
      validAfter: BigInt(authorization.validAfter),
      validBefore: BigInt(authorization.validBefore),
      nonce: authorization.nonce as Hex,
    },
    signature,
  });
  if (recovered.toLowerCase() !== authorization.from.toLowerCase())
    throw new Error(`recovered ${recovered}, signed by ${authorization.from}`);
}

/**
 * CPU per signature recovery (ms), as @x402/evm's verify does it for an EOA's EIP-3009 payload,
 * over `payloads` but the first. Its verify and its settle each do one per paid request, in the
 * package, whatever the facilitator around it costs. The first recovery is left out: it builds
 * @noble/curves' tables and warms the JIT, which a running service has long done.
 */
export async function recoveryCpuMs(payloads: readonly PaymentPayload[]): Promise<number> {
  const [first, ...measured] = payloads;
  if (first) await recoverPayer(first);
  const started = process.cpuUsage();
  for (const payload of measured) await recoverPayer(payload);
  const used = process.cpuUsage(started);
  return (used.user + used.system) / 1000 / Math.max(1, measured.length);
}

export interface PaidLoad {
  /** Each paid request's time, from the first GET to the paid answer. */
  latencies: number[];
  failed: number;
  /** The measured window (ms). */
  ms: number;
}

/**
 * One warm-up paid request per client, then every client paying in a loop for `seconds`; the
 * paid requests' times. Throws when a warm-up request fails.
 */
export async function payingLoad(
  url: string,
  fetches: readonly (typeof fetch)[],
  seconds: number,
  log: (message: string) => void,
  onStart: () => void = () => {},
): Promise<PaidLoad> {
  const payOnce = async (pay: typeof fetch): Promise<boolean> => {
    const res = await pay(url);
    const body = await res.text();
    if (res.status === 200 && body.includes("sunny")) return true;
    log(`paid request answered ${res.status}: ${body.slice(0, 200)}`);
    return false;
  };
  log(`warm-up: one paid request per client (${fetches.length})`);
  const warm = await Promise.all(fetches.map(payOnce));
  if (warm.some((ok) => !ok)) throw new Error("a warm-up paid request failed");
  log(`${fetches.length} paying clients for ${seconds} s`);
  const latencies: number[] = [];
  let failed = 0;
  onStart();
  const started = performance.now();
  const end = started + seconds * 1000;
  await Promise.all(
    fetches.map(async (pay) => {
      while (performance.now() < end) {
        const t0 = performance.now();
        if (await payOnce(pay)) latencies.push(performance.now() - t0);
        else failed++;
      }
    }),
  );
  return { latencies, failed, ms: performance.now() - started };
}

/** What a paid-requests window measured. */
export interface PaidFigures {
  concurrency: number;
  seconds: number;
  paid: number;
  failed: number;
  paidPerSecond: number;
  paidLatency: LatencySummary;
}

export interface ServicePaidFigures extends PaidFigures {
  /** CPU per paid request (ms): the service's process, PostgreSQL's, and this one's (clients and resource). */
  serviceCpuMs: number;
  postgresCpuMs: number;
  benchCpuMs: number;
}

/** Paid requests against the service in its own process on PostgreSQL (see the top of this file). */
export async function serviceScenario(
  steps: Cleanups,
  log: (message: string) => void,
): Promise<ServicePaidFigures> {
  const seconds = envInt("BENCH_X402_SECONDS", QUICK ? 3 : 10);
  const concurrency = envInt("BENCH_X402_CONCURRENCY", 32);
  const pg = await startPostgresServer("x402-service", steps, log);
  const adminSecret = randomBytes(24).toString("hex");
  const service = await startService("x402", steps, {
    databaseUrl: pg.url,
    adminSecret,
    env: { RATE_LIMIT_SANDBOX: "10000000" },
  });
  const created = await postJson(
    `${service.base}/api/v1/workspaces`,
    { name: "x402 bench (service process)", settlementAddress: "0x1111111111111111111111111111111111111111" },
    { authorization: `Bearer ${adminSecret}` },
  );
  const key = dig(created.json, "apiKeys", "test", "key");
  const payTo = dig(created.json, "workspace", "eoa", "address");
  if (created.status !== 201 || typeof key !== "string" || typeof payTo !== "string")
    throw new Error(
      `workspace creation failed: ${created.status} ${JSON.stringify(created.json).slice(0, 300)}`,
    );
  const auth = { authorization: `Bearer ${key}` };
  const payers: Hex[] = Array.from({ length: concurrency }, () => generatePrivateKey());
  log(`funding ${concurrency} payers from the workspace (faucet, then sandbox payouts)`);
  const funded = await postJson(
    `${service.base}/api/v1/sandbox/faucet`,
    { tokenSymbol: "USDC", amount: String(PAYER_USDC * concurrency) },
    auth,
  );
  if (funded.status >= 300) throw new Error(`faucet failed: ${funded.status} ${JSON.stringify(funded.json)}`);
  for (const payer of payers) {
    const paid = await postJson(
      `${service.base}/api/v1/payouts`,
      {
        tokenSymbol: "USDC",
        amount: String(PAYER_USDC),
        destinationAddress: privateKeyToAccount(payer).address,
        network: SANDBOX_A.id,
      },
      auth,
    );
    if (paid.status !== 200)
      throw new Error(`payout to a payer failed: ${paid.status} ${JSON.stringify(paid.json)}`);
  }
  const resource = await paidResource(service.base, key, {
    network: NETWORK_A,
    asset: SANDBOX_USDC,
    amount: PRICE.toString(),
    payTo,
  });
  const closeResource = steps.defer("paid resource (service process)", () => resource.close());
  const fetches = payers.map((payer) => payingFetch(payer, { network: NETWORK_A, asset: SANDBOX_USDC }));
  // The backends the service opened by the end of the warm-up (its pool), read as the window opens.
  const window = cpuWindow(service.pid, pg.dir);
  window.open();
  const load = await payingLoad(resource.url, fetches, seconds, log, () => window.open());
  const cpu = window.close(load.latencies.length);
  await closeResource();
  return {
    concurrency,
    seconds: load.ms / 1000,
    paid: load.latencies.length,
    failed: load.failed,
    paidPerSecond: (load.latencies.length / load.ms) * 1000,
    paidLatency: summarize(load.latencies),
    serviceCpuMs: cpu.serviceMs,
    postgresCpuMs: cpu.postgresMs,
    benchCpuMs: cpu.benchMs,
  };
}
