import type { Devnet } from "./chain.ts";

// The text of DATA_DIR/devnet.env that `npm run devnet` writes (src/devnet/main.ts): apart from
// main.ts, which starts a devnet when imported, so that tests can check it.

/**
 * The env file for a running devnet: the chain, its tokens and accounts, then the ERC-4337 stack
 * and Uniswap v3 (D16) when the devnet has them (`npm run devnet` always starts both).
 */
export function envFileText(devnet: Devnet): string {
  const { tokens, accounts, aa, swap } = devnet;
  const lines = [
    "# Written by `npm run devnet`: a local chain standing in for the live network.",
    `# Load it with NETWORK_ENV_FILE=<this file> npm start (variables already set win).`,
    `LIVE_RPC_URL=${devnet.rpcUrl}`,
    `LIVE_CHAIN_ID=${devnet.chainId}`,
    `LIVE_USDC_ADDRESS=${tokens.USDC}`,
    `LIVE_ADAO_ADDRESS=${tokens.ADAO}`,
    `LIVE_DAI_ADDRESS=${tokens.DAI}`,
    `LIVE_TREASURY_ADDRESS=${accounts.treasury.address}`,
    "LIVE_CONFIRMATIONS=2",
    `LIVE_GAS_FUNDER_KEY=${accounts.gasFunder.privateKey}`,
  ];
  if (aa) {
    lines.push(
      "# ERC-4337 (D11): the bundler, a paymaster sponsoring every user operation (devnet only),",
      "# EntryPoint v0.8 and the SimpleAccountFactory.",
      `LIVE_BUNDLER_URL=${aa.bundlerUrl}`,
      `LIVE_PAYMASTER_ADDRESS=${aa.paymaster}`,
      `LIVE_ENTRYPOINT_ADDRESS=${aa.entryPoint}`,
      `LIVE_ACCOUNT_FACTORY_ADDRESS=${aa.accountFactory}`,
      "# This Alto bundles an operation at once when asked (pimlico_sendUserOperationNow).",
      "LIVE_BUNDLER_INSTANT_BUNDLING=true",
    );
  }
  if (swap) {
    lines.push(
      "# Uniswap v3 (D16): the SwapRouter, QuoterV2, the factory and WETH9; pools seeded by fee tier:",
      `# ${swap.pools.map((p) => `${p.pair} ${p.fee}`).join(", ")}.`,
      `LIVE_SWAP_ROUTER_ADDRESS=${swap.router}`,
      `LIVE_SWAP_QUOTER_ADDRESS=${swap.quoter}`,
      `LIVE_SWAP_FACTORY_ADDRESS=${swap.factory}`,
      `LIVE_WETH_ADDRESS=${swap.weth}`,
      // Only the tiers seeded: a quote asks no pool that is not there.
      `LIVE_SWAP_FEE_TIERS=${[...new Set(swap.pools.map((p) => p.fee))].sort((a, b) => a - b).join(",")}`,
    );
  }
  lines.push(
    "# A funded account holding every test token, for demos and tests (not used by the service).",
    `DEVNET_PAYER_KEY=${accounts.payer.privateKey}`,
  );
  return `${lines.join("\n")}\n`;
}
