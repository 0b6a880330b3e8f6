import type { Devnet, DevnetAccountAbstraction } from "../../src/devnet/chain.ts";

/** The network the LIVE_… variables configure (D22): where its chain records are kept. */
export const LIVE_DEFAULT = { environment: "live", id: "default" } as const;

/** The LIVE_* variables (D14) that point the service at a test devnet. */
export function liveNetworkEnv(devnet: Devnet, extra: Record<string, string> = {}): Record<string, string> {
  return {
    LIVE_RPC_URL: devnet.rpcUrl,
    LIVE_CHAIN_ID: String(devnet.chainId),
    LIVE_USDC_ADDRESS: devnet.tokens.USDC,
    LIVE_ADAO_ADDRESS: devnet.tokens.ADAO,
    LIVE_DAI_ADDRESS: devnet.tokens.DAI,
    LIVE_TREASURY_ADDRESS: devnet.accounts.treasury.address,
    LIVE_CONFIRMATIONS: "2",
    LIVE_GAS_FUNDER_KEY: devnet.accounts.gasFunder.privateKey,
    LIVE_POLL_INTERVAL_MS: "100",
    RATE_LIMIT_LIVE: "100000",
    ...extra,
  };
}

/**
 * The variables of a live environment with one network per devnet (D22): `LIVE_NETWORKS` lists
 * `ids`, the first the default, each network's variables under its own prefix (`LIVE_DEVNET_B_…`).
 */
export function liveNetworksEnv(
  devnets: ReadonlyArray<readonly [id: string, devnet: Devnet]>,
  extra: Record<string, string> = {},
): Record<string, string> {
  const env: Record<string, string> = { LIVE_NETWORKS: devnets.map(([id]) => id).join(",") };
  for (const [id, devnet] of devnets) {
    const prefix = `LIVE_${id.toUpperCase().replaceAll("-", "_")}`;
    for (const [name, value] of Object.entries(liveNetworkEnv(devnet))) {
      if (name.startsWith("LIVE_")) env[`${prefix}_${name.slice("LIVE_".length)}`] = value;
      else env[name] = value;
    }
  }
  return { ...env, ...extra };
}

/**
 * The ERC-4337 variables of the devnet's paymaster: its ERC-7677 service, which signs every operation
 * for the VerifyingPaymaster (the default), or the bare sponsoring paymaster's address.
 */
export function paymasterEnv(
  aa: DevnetAccountAbstraction,
  mode: "service" | "address" = "service",
  prefix = "LIVE",
): Record<string, string> {
  return mode === "service"
    ? { [`${prefix}_PAYMASTER_URL`]: aa.paymasterUrl }
    : { [`${prefix}_PAYMASTER_ADDRESS`]: aa.sponsoringPaymaster };
}

/**
 * liveNetworkEnv plus the ERC-4337 variables that point the service at the devnet's bundler and
 * contracts, gas paid through its paymaster service unless `paymaster` is "address".
 */
export function liveSmartWalletEnv(
  devnet: Devnet,
  aa: DevnetAccountAbstraction,
  extra: Record<string, string> = {},
  paymaster: "service" | "address" = "service",
): Record<string, string> {
  return liveNetworkEnv(devnet, {
    LIVE_BUNDLER_URL: aa.bundlerUrl,
    ...paymasterEnv(aa, paymaster),
    LIVE_ENTRYPOINT_ADDRESS: aa.entryPoint,
    LIVE_ACCOUNT_FACTORY_ADDRESS: aa.accountFactory,
    ...extra,
  });
}

/**
 * What the kill -9 suites add: short leases, so that a killed instance's transfers are the
 * reconciler's, and its jobs another instance's, 5 s after the kill rather than 20 and 10.
 */
export const CRASH_ENV = { TRANSFER_LEASE_SECONDS: "5", JOB_LEASE_SECONDS: "5" } as const;
