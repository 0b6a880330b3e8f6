import { type PublicClient, parseEventLogs, TransactionReceiptNotFoundError } from "viem";
import { entryPoint08Abi } from "viem/account-abstraction";
import type { Hex } from "../network.ts";

// Which ERC-4337 user operations a mined transaction (a bundle) carried: the hashes its
// EntryPoint's UserOperationEvent logs name. The chain watcher asks this of the few transfers that
// may be the proceeds of the service's own smart-wallet swaps, whose operations it recorded (by
// their hash) before they were sent, while the bundle's transaction hash is known only later.
// The event's shape is the same in EntryPoint v0.6, v0.7 and v0.8.
export async function userOperationsIn(client: PublicClient, txHash: Hex): Promise<Hex[]> {
  try {
    const receipt = await client.getTransactionReceipt({ hash: txHash });
    return parseEventLogs({ abi: entryPoint08Abi, eventName: "UserOperationEvent", logs: receipt.logs }).map(
      (log) => log.args.userOpHash,
    );
  } catch (err) {
    if (err instanceof TransactionReceiptNotFoundError) return [];
    throw err;
  }
}
