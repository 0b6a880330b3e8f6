import { BaseError, InsufficientFundsError, type PublicClient } from "viem";
import type { Hex, TransferGas } from "../network.ts";
import { errorText, isNodeAnswer, isNodeBusy } from "../node-errors.ts";

// The gas limit of plain ETH sent from a workspace wallet. To an account without code a transfer
// uses exactly 21,000. To a contract (a multisig, a smart wallet) its receiving code runs on the
// wallet's gas, and whoever names the recipient (a payer, for a refund) chooses that code: the
// limit is the node's estimate plus half, at most the cap, and a recipient that needs more, or
// whose code reverts in the estimate, is refused before anything is signed (docs/operations.md).

export const ETH_TRANSFER_GAS = 21_000n;

/**
 * The most gas plain ETH to a contract is signed with. A Safe, an ERC-4337 account or a contract
 * forwarding what it receives takes ETH for about 25,000–60,000 gas, which the estimate plus half
 * fits; a payer naming a gas-burning contract costs the wallet at most this (about seven plain
 * transfers).
 */
export const CONTRACT_ETH_GAS_CAP = 150_000n;

export async function ethTransferGas(
  client: PublicClient,
  from: Hex,
  to: Hex,
  amount: bigint,
): Promise<TransferGas> {
  const code = await client.getCode({ address: to });
  if (!code || code === "0x") return { gas: ETH_TRANSFER_GAS, refusal: null };
  // Measured, with half again as headroom for state that differs at inclusion, up to the cap;
  // only the gas used is paid.
  let estimate: bigint;
  try {
    estimate = await client.estimateGas({ account: from, to, value: amount });
  } catch (err) {
    // No answer, or a busy node: an error of the send, which says nothing of the recipient.
    if (!isNodeAnswer(err) || isNodeBusy(err)) throw err;
    // The wallet lacks the amount at this state: the balance check refuses it, or the chain.
    if (err instanceof BaseError && err.walk((e) => e instanceof InsufficientFundsError))
      return { gas: CONTRACT_ETH_GAS_CAP, refusal: null };
    return {
      gas: CONTRACT_ETH_GAS_CAP,
      refusal: `the recipient's code refuses ETH (the node's estimate: ${errorText(err)}); nothing was sent`,
    };
  }
  if (estimate > CONTRACT_ETH_GAS_CAP)
    return {
      gas: CONTRACT_ETH_GAS_CAP,
      refusal: `the recipient's code needs ${estimate} gas to take ETH, more than the ${CONTRACT_ETH_GAS_CAP} allowed; nothing was sent`,
    };
  const limit = estimate + estimate / 2n;
  return { gas: limit < CONTRACT_ETH_GAS_CAP ? limit : CONTRACT_ETH_GAS_CAP, refusal: null };
}
