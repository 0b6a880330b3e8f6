import { rpc } from "../../src/devnet/chain.ts";

// Switching a devnet's mining, for the suites that hold transactions pending.

/** Off: no blocks at all. On: the devnet's defaults, a block on every transaction and one a second. */
export async function setMining(rpcUrl: string, on: boolean): Promise<void> {
  await rpc(rpcUrl, "evm_setAutomine", [on]);
  await rpc(rpcUrl, "evm_setIntervalMining", [on ? 1000 : 0]);
}
