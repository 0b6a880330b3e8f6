import type { FastifyBaseLogger } from "fastify";
import type { Network } from "./network.ts";
import { errorText, isNodeAnswer, isNodeBusy } from "./node-errors.ts";
import type { RecordedTransaction } from "./sent-transactions.ts";

// What a broadcast of a recorded transaction tells its sender (transaction-sender.ts): whether the
// node has it, or why it refused it; a busy node decides nothing.

/**
 * Null once the node has the transaction; the node's reason when it refused it. Throws when the
 * node is busy (rate limits): nothing is decided, the transaction stays open to be sent again.
 */
export async function broadcastRecorded(
  network: Network,
  log: FastifyBaseLogger,
  tx: RecordedTransaction,
): Promise<string | null> {
  try {
    await network.broadcast(tx.raw);
    return null;
  } catch (err) {
    if (isNodeBusy(err)) throw err;
    if (!isNodeAnswer(err)) {
      // No answer (network): it may have arrived; the receipt wait and the reconciler tell.
      log.warn({ err, txHash: tx.txHash }, "broadcast got no answer; the transaction stays open");
      return null;
    }
    // Some nodes answer an error for a transaction they still take (a revert under automine).
    if (await network.known(tx.txHash)) return null;
    return errorText(err);
  }
}
