import type { Devnet } from "./chain.ts";

// The text of DATA_DIR/devnet.env that `npm run devnet` writes (src/devnet/main.ts): apart from
// main.ts, which starts a devnet when imported, so that tests can check it.

/** The ids of the devnet's further chains (D22): `devnet-b`, `devnet-c`, … */
export const furtherNetworkId = (index: number): string => `devnet-${String.fromCharCode(98 + index)}`;

/**
 * The env file for a running devnet: the chain, its tokens and accounts, then the ERC-4337 stack
 * and Uniswap v3 (D16) when the devnet has them (`npm run devnet` always starts both). `further`
 * chains (`--networks`) are more networks of live (D22): `LIVE_NETWORKS` lists `default` (the
 * first chain) and theirs, each under its own prefix (`LIVE_DEVNET_B_…`), with its bundler.
 */
export function envFileText(devnet: Devnet, further: readonly Devnet[] = []): string {
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
      "# ERC-4337 (D11): the bundler, the devnet's ERC-7677 paymaster service (it signs every user",
      "# operation for the VerifyingPaymaster; devnet only), EntryPoint v0.8 and the SimpleAccountFactory.",
      `# LIVE_PAYMASTER_ADDRESS=${aa.sponsoringPaymaster} instead of the URL: a bare paymaster that signs nothing.`,
      `LIVE_BUNDLER_URL=${aa.bundlerUrl}`,
      `LIVE_PAYMASTER_URL=${aa.paymasterUrl}`,
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
  if (further.length > 0) {
    const ids = further.map((_, i) => furtherNetworkId(i));
    lines.push(
      "# More networks of live (D22), each its own chain: the default network is the one above.",
      `LIVE_NETWORKS=default,${ids.join(",")}`,
    );
    further.forEach((chain, i) => {
      const p = `LIVE_${furtherNetworkId(i).toUpperCase().replace("-", "_")}`;
      lines.push(
        `${p}_NAME=Devnet ${String.fromCharCode(66 + i)}`,
        `${p}_RPC_URL=${chain.rpcUrl}`,
        `${p}_CHAIN_ID=${chain.chainId}`,
        `${p}_USDC_ADDRESS=${chain.tokens.USDC}`,
        `${p}_ADAO_ADDRESS=${chain.tokens.ADAO}`,
        `${p}_DAI_ADDRESS=${chain.tokens.DAI}`,
        `${p}_TREASURY_ADDRESS=${chain.accounts.treasury.address}`,
        `${p}_CONFIRMATIONS=2`,
        `${p}_GAS_FUNDER_KEY=${chain.accounts.gasFunder.privateKey}`,
      );
      if (chain.aa)
        lines.push(
          `${p}_BUNDLER_URL=${chain.aa.bundlerUrl}`,
          `${p}_PAYMASTER_URL=${chain.aa.paymasterUrl}`,
          `${p}_ENTRYPOINT_ADDRESS=${chain.aa.entryPoint}`,
          `${p}_ACCOUNT_FACTORY_ADDRESS=${chain.aa.accountFactory}`,
          `${p}_BUNDLER_INSTANT_BUNDLING=true`,
        );
    });
  }
  lines.push(
    "# A funded account holding every test token, for demos and tests (not used by the service).",
    `DEVNET_PAYER_KEY=${accounts.payer.privateKey}`,
  );
  return `${lines.join("\n")}\n`;
}
