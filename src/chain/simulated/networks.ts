import { isAddressEqual } from "viem";
import type { ChainToken, Hex } from "../network.ts";

// The sandbox's simulated networks (D22): what the simulated ledger answers to when the sandbox has
// no chain of its own. Their chain ids and token addresses are fixed and documented (docs/api.md),
// so a client can treat them as it treats a live network's; no chain has them, and nothing is ever
// sent to one. Each token address is the last 20 bytes of keccak256("<network id>:<symbol>").

export interface SimulatedNetwork {
  id: string;
  chainId: number;
  name: string;
  /** The ERC-20s of the network; ETH is its native coin. */
  tokens: Readonly<Partial<Record<ChainToken, Hex>>>;
}

/** sandbox-a: the sandbox's default network, where its ledger has always kept its balances. */
export const SANDBOX_A: SimulatedNetwork = {
  id: "sandbox-a",
  chainId: 73_570_001,
  name: "Sandbox A",
  tokens: {
    USDC: "0xE948B10A290BF5Ee274cF0B50d1387fb7049B9f3",
    ADAO: "0xE60175510c6D44D9b71339CF26da9e9DcAc76915",
    DAI: "0xe33f954364B743E50C658761694ee7Eb58247693",
  },
};

/** sandbox-b: the second simulated network, with balances of its own. */
export const SANDBOX_B: SimulatedNetwork = {
  id: "sandbox-b",
  chainId: 73_570_002,
  name: "Sandbox B",
  tokens: {
    USDC: "0x29840E9CeDf837FBEEE1cCF1b8F42A64Ce49080A",
    ADAO: "0x263B2D76f98d13eF404b770766cc36508aaCe893",
    DAI: "0x6ab098F5005887B1e625aB42d84b34eC8fC3BD7C",
  },
};

/** The sandbox's simulated networks, its default (sandbox-a) first. */
export const SIMULATED_NETWORKS: readonly SimulatedNetwork[] = [SANDBOX_A, SANDBOX_B];

/** The token of `network` at contract `address` (any case), if it has one there. */
export function tokenAt(network: SimulatedNetwork, address: Hex): ChainToken | undefined {
  const found = Object.entries(network.tokens).find(([, a]) => a && isAddressEqual(a, address));
  return found?.[0] as ChainToken | undefined;
}
