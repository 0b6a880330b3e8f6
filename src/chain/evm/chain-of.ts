import { type Chain, defineChain } from "viem";
import type { NetworkConfig } from "../../config.ts";

/** viem's description of an environment's network (D14): its chain id and RPC URL, ETH its currency. */
export function chainOf(config: Pick<NetworkConfig, "chainId" | "environment" | "rpcUrl">): Chain {
  return defineChain({
    id: config.chainId,
    name: `${config.environment} network`,
    nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
    rpcUrls: { default: { http: [config.rpcUrl] } },
  });
}
