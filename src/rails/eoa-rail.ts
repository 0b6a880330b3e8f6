import type { ChainToken, Hex, Network } from "../chain/network.ts";
import { RecordRefused, type SentTransfer } from "../chain/sent-types.ts";
import type { TransactionSender } from "../chain/transaction-sender.ts";
import {
  type Move,
  type MoveHooks,
  type MoveOutcome,
  MoveRefused,
  type Rail,
  type Submission,
  type WalletFunds,
} from "./rail.ts";

// A workspace EOA as a rail: its legs are transactions signed with consecutive nonces, recorded
// before they are broadcast and broadcast in nonce order across instances (TransactionSender);
// the legs of one move go together (once one is refused, the ones after it are cancelled). Gas is
// paid by the wallet. What a sender left open is finished by `reconcile` from the chain.

export class EoaRail implements Rail {
  readonly pipelined = true;
  readonly #network: Network;
  readonly #sender: TransactionSender;

  constructor(network: Network, sender: TransactionSender) {
    this.#network = network;
    this.#sender = sender;
  }

  balance(address: Hex, token: ChainToken): Promise<bigint> {
    return this.#network.balance(address, token);
  }

  funds(address: Hex, tokens: readonly ChainToken[]): Promise<WalletFunds> {
    // One block for balances and nonce: the payout service tells by the nonce which of the
    // wallet's transactions in flight that balance already paid for.
    return this.#network.accountAt(address, tokens);
  }

  gasRequired(token: ChainToken): Promise<bigint> {
    return this.#network.transferGasCost(token);
  }

  gasCost(units: bigint): Promise<bigint> {
    return this.#network.gasCost(units);
  }

  prepare(): undefined {
    return undefined;
  }

  resume(): undefined {
    return undefined;
  }

  reconcile(): Promise<void> {
    return this.#sender.reconcile();
  }

  async submit(move: Move, hooks: MoveHooks): Promise<Submission> {
    if (hooks.persist && !(await hooks.persist())) throw new MoveRefused("not recorded by its caller");
    const transfers = move.legs.map((leg) => ({
      ...leg,
      paymentId: move.paymentId ?? null,
      payoutId: move.payoutId ?? null,
    }));
    let submitted: Awaited<ReturnType<TransactionSender["submit"]>>;
    try {
      submitted = await this.#sender.submit(await move.signingKey(), move.from, transfers, {
        ...(hooks.claim ? { claim: hooks.claim } : {}),
        ...(hooks.guard ? { guard: hooks.guard } : {}),
        together: move.legs.length > 1,
      });
    } catch (err) {
      if (err instanceof RecordRefused) throw new MoveRefused(err.message);
      throw err;
    }
    return { outcome: this.#sender.receipts(submitted).then(outcomeOf) };
  }
}

/**
 * A move's outcome from its legs': pending while one is open (its outcome, and whether the legs
 * after a refused one were cancelled, is the chain's to tell), else reverted if one was.
 */
function outcomeOf(sent: SentTransfer[]): MoveOutcome {
  const first = sent[0];
  if (!first) throw new Error("the sender returned no transaction");
  const legs = sent.map((s) => ({ purpose: s.purpose, txHash: s.txHash }));
  if (sent.some((s) => s.status === "not_found"))
    return { status: "pending", txHash: first.txHash, legs, error: null };
  const reverted = sent.find((s) => s.status === "reverted");
  if (reverted) {
    return {
      status: "reverted",
      txHash: reverted.txHash,
      legs,
      error: reverted.error ?? "transaction reverted",
    };
  }
  // The last leg completes the move (a swap's router call after its approval).
  return { status: "success", txHash: (sent.at(-1) ?? first).txHash, legs, error: null };
}
