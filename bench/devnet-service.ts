import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Address } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { type Devnet, startDevnet } from "../src/devnet/chain.ts";
import { type DevnetClients, devnetClients } from "../test/support/devnet-clients.ts";
import { liveSmartWalletEnv } from "../test/support/devnet-env.ts";
import {
  callService,
  type ServiceProcess,
  startService,
  stopService,
} from "../test/support/service-process.ts";
import { benchPaymaster, type Cleanups } from "./support.ts";

// What bench/settlement.ts and bench/splits.ts share: a devnet with the ERC-4337 stack and the
// service as its own process on it (`node src/main.ts`, test/support/service-process.ts, embedded
// PGlite under a temporary DATA_DIR), configured as the live tests have it (liveSmartWalletEnv:
// LIVE_CONFIRMATIONS=2, watcher/chain job every 100 ms, the test bundler env); calls to its API;
// and live workspaces that receive their payments on the EOA or on the smart wallet. It needs
// nothing from src/ but the devnet, so those benches run on an older tree given this tree's
// bench/ and test/support/ (devnet-clients.ts, devnet-env.ts, service-process.ts).

export const same = (a: string | null | undefined, b: string) => a?.toLowerCase() === b.toLowerCase();
export const randomAddress = () => privateKeyToAccount(generatePrivateKey()).address;

/** A call to the service that must answer one of `expected`; its JSON as the caller says it is. */
export async function api<T>(
  service: ServiceProcess,
  method: string,
  path: string,
  token: string,
  expected: number[],
  body?: unknown,
): Promise<T> {
  const res = await callService<T>(service, method, path, token, body);
  if (!expected.includes(res.status))
    throw new Error(`${method} ${path} answered ${res.status}: ${JSON.stringify(res.json).slice(0, 500)}`);
  return res.json;
}

export interface DevnetService {
  devnet: Devnet;
  /** The service's live settings (liveSmartWalletEnv). */
  live: Record<string, string>;
  service: ServiceProcess;
  clients: DevnetClients;
  adminSecret: string;
}

/** The devnet (automine plus a block every `blockTimeMs`) and the service on it, both stopped by `steps`. */
export async function startDevnetService(
  name: string,
  blockTimeMs: number,
  steps: Cleanups,
  log: (message: string) => void,
): Promise<DevnetService> {
  log("starting the devnet with the ERC-4337 stack");
  const devnet = await startDevnet({ accountAbstraction: true, blockTimeMs });
  steps.defer("devnet", () => devnet.stop());
  const aa = devnet.aa;
  if (!aa) throw new Error("startDevnet({ accountAbstraction: true }) returned no aa");
  const paymaster = benchPaymaster();
  const live = liveSmartWalletEnv(devnet, aa, {}, paymaster);
  const dataDir = mkdtempSync(join(tmpdir(), `bench-${name}-data-`));
  steps.defer("service data folder", async () => rmSync(dataDir, { recursive: true, force: true }));
  log(`starting the service (node src/main.ts), paymaster: ${paymaster}`);
  const adminSecret = randomBytes(24).toString("hex");
  const service = await startService({ ...live, DATA_DIR: dataDir, ADMIN_SECRET: adminSecret });
  steps.defer("service", () => stopService(service.child));
  return { devnet, live, service, clients: devnetClients(devnet), adminSecret };
}

export type WalletKind = "eoa" | "smart_wallet";

/**
 * A live workspace settling to `settlementAddress` that receives its payments on its EOA (given
 * ETH for the settlement legs' gas, as the gas top-up job would have long before: the figures
 * are the settlement's, not a top-up's) or on its smart wallet, made its default wallet type.
 */
export async function liveWorkspace(
  env: DevnetService,
  kind: WalletKind,
  name: string,
  settlementAddress: Address,
): Promise<{ id: string; key: string; receiving: Address }> {
  const { service, clients, adminSecret } = env;
  const created = await api<{
    workspace: { id: string; eoa: { address: string } };
    apiKeys: { live: { key: string } };
  }>(service, "POST", "/api/v1/workspaces", adminSecret, [201], { name, settlementAddress });
  const id = created.workspace.id;
  const key = created.apiKeys.live.key;
  if (kind === "eoa") {
    const receiving = created.workspace.eoa.address as Address;
    await clients.credit(receiving, { ETH: "1" });
    return { id, key, receiving };
  }
  const smart = await api<{ smartWallet: { address: string }; defaultWalletType: string }>(
    service,
    "POST",
    `/api/v1/workspaces/${id}/smart-wallet`,
    key,
    [200, 201],
    { setDefault: true },
  );
  if (smart.defaultWalletType !== "smart_wallet")
    throw new Error(`the default wallet type is ${smart.defaultWalletType}, not smart_wallet`);
  return { id, key, receiving: smart.smartWallet.address as Address };
}

/** The fields of the API's Payment object the settlement and splits benches read. */
export interface PaymentJson {
  id: string;
  status: string;
  walletType: string;
  receivingAddress: string | null;
  merchantWallet: string | null;
  feeAmount: string;
  netAmount: string;
  txHash: string | null;
  settlementTxHashes: { net: string | null; fee: string | null } | null;
  failureReason: string | null;
  updatedAt: string;
}
