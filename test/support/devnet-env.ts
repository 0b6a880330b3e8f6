import type { Devnet } from "../../src/devnet/chain.ts";

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
