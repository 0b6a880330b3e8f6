import { decodeEventLog, erc20Abi, formatUnits, type Hex, http, type PublicClient } from "viem";
import { type BundlerClient, createBundlerClient } from "viem/account-abstraction";
import { afterAll, beforeAll, expect } from "vitest";
import { type Devnet, startDevnet } from "../../src/devnet/chain.ts";
import { createWorkers, type Workers } from "../../src/workers.ts";
import { startTestApp, type TestApp } from "./app.ts";
import { type DevnetClients, devnetClients } from "./devnet-clients.ts";
import { liveSmartWalletEnv } from "./devnet-env.ts";
import { WebhookReceiver } from "./receiver.ts";

// The live service the devnet suites of refunds and splits run against, written once: a devnet
// with account abstraction, the app on it (EOA and smart wallet), its workers and a webhook
// receiver; and the checks both make of a transfer on the chain.

export const FEE_BPS = 150n;
export const WHOLE = 10_000n;
export const DECIMALS = { USDC: 6, ETH: 18 } as const;
export type Token = keyof typeof DECIMALS;

/** D4's formatting, written again: at least two decimals, more only when needed. */
export function fmt(units: bigint, token: Token): string {
  const text = formatUnits(units, DECIMALS[token]);
  const [whole, fraction = ""] = text.split(".");
  return `${whole}.${fraction.padEnd(2, "0")}`;
}

export interface LiveService {
  devnet: Devnet;
  aa: NonNullable<Devnet["aa"]>;
  t: TestApp;
  workers: Workers;
  receiver: WebhookReceiver;
  chain: PublicClient;
  bundler: BundlerClient;
  clients: DevnetClients;
}

/**
 * Registers the file's hooks: before all, starts the live service (the app configured by
 * liveSmartWalletEnv with WEBHOOK_ALLOW_PRIVATE=true, since the receiver is on 127.0.0.1, and
 * `env` over it) and hands it to `started`; after all, stops what was started.
 */
export function useLiveService(env: Record<string, string>, started: (service: LiveService) => void): void {
  let service: Partial<LiveService> = {};
  beforeAll(async () => {
    const devnet = await startDevnet({ accountAbstraction: true });
    service.devnet = devnet;
    if (!devnet.aa) throw new Error("startDevnet({ accountAbstraction: true }) returned no aa");
    const aa = devnet.aa;
    const t = await startTestApp(liveSmartWalletEnv(devnet, aa, { WEBHOOK_ALLOW_PRIVATE: "true", ...env }));
    service.t = t;
    const clients = devnetClients(devnet);
    const chain = clients.chain;
    const bundler = createBundlerClient({
      client: chain,
      transport: http(aa.bundlerUrl),
      pollingInterval: 100,
    });
    const receiver = new WebhookReceiver();
    service.receiver = receiver;
    await receiver.start();
    const workers = createWorkers(t.app, { dispatcher: { pollIntervalMs: 50 } });
    service.workers = workers;
    workers.start();
    started({ devnet, aa, t, workers, receiver, chain, bundler, clients });
  }, 180_000);

  afterAll(async () => {
    await service.workers?.stop();
    await service.receiver?.stop();
    await service.t?.close();
    await service.devnet?.stop();
    service = {};
  });
}

const same = (a: string | null | undefined, b: string) => a?.toLowerCase() === b.toLowerCase();

/** The Transfer events of token `usdc` in a receipt's logs, as [from, to, value] in lower case. */
export function usdcTransfersOf(
  usdc: string,
  logs: ReadonlyArray<{ address: string; data: Hex; topics: [Hex, ...Hex[]] | [] }>,
) {
  const transfers: Array<[string, string, bigint]> = [];
  for (const log of logs) {
    if (!same(log.address, usdc)) continue;
    const decoded = decodeEventLog({ abi: erc20Abi, data: log.data, topics: log.topics });
    if (decoded.eventName !== "Transfer") continue;
    transfers.push([decoded.args.from.toLowerCase(), decoded.args.to.toLowerCase(), decoded.args.value]);
  }
  return transfers;
}

/**
 * `txHash` is a mined transaction sent by the EOA `from`, carrying exactly `amount` of `token`
 * (USDC at `usdc`, or ETH) to `to` and nothing else; the ETH it cost in gas.
 */
export async function expectTransferTransaction(
  service: { chain: PublicClient; usdc: string },
  transfer: { token: Token; txHash: string; from: string; to: string; amount: bigint },
): Promise<bigint> {
  const { chain, usdc } = service;
  const { token, txHash, from, to, amount } = transfer;
  const [tx, receipt] = await Promise.all([
    chain.getTransaction({ hash: txHash as Hex }),
    chain.getTransactionReceipt({ hash: txHash as Hex }),
  ]);
  expect(receipt.status).toBe("success");
  expect(same(tx.from, from)).toBe(true);
  if (token === "ETH") {
    expect(same(tx.to, to)).toBe(true);
    expect(tx.value).toBe(amount);
    expect(receipt.logs).toEqual([]);
  } else {
    expect(same(tx.to, usdc)).toBe(true);
    expect(tx.value).toBe(0n);
    expect(usdcTransfersOf(usdc, receipt.logs)).toEqual([[from.toLowerCase(), to.toLowerCase(), amount]]);
  }
  return receipt.gasUsed * receipt.effectiveGasPrice;
}
