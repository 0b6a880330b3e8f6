import { type Chain, defineChain } from "viem";
import type { NetworkConfig } from "../../config.ts";

/** viem's description of a network (D14): its chain id, name and RPC URL, ETH its currency. */
export function chainOf(config: Pick<NetworkConfig, "chainId" | "name" | "rpcUrl">): Chain {
  return defineChain({
    id: config.chainId,
    name: config.name,
    nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
    rpcUrls: { default: { http: [config.rpcUrl] } },
  });
}
