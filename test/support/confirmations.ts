import type { Hex, PublicClient } from "viem";

/** The confirmations the test devnets' LIVE_CONFIRMATIONS asks for (devnet-env.ts). */
export const TEST_CONFIRMATIONS = 2n;

/**
 * Waits (bounded) until `txHash` has the network's confirmations: an unmatched transfer is
 * attached or returned only then (D19, as a payment is confirmed). The devnet mines a block a
 * second.
 */
export async function untilConfirmed(
  chain: Pick<PublicClient, "waitForTransactionReceipt" | "getBlockNumber">,
  txHash: string,
  timeoutMs = 30_000,
): Promise<void> {
  const receipt = await chain.waitForTransactionReceipt({ hash: txHash as Hex });
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const head = await chain.getBlockNumber();
    if (head - receipt.blockNumber + 1n >= TEST_CONFIRMATIONS) return;
    if (Date.now() > deadline) throw new Error(`${txHash} not confirmed within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
