import type { ChainToken, Hex, Network } from "../../chain/network.ts";
import type { SimulatedLedger } from "../../chain/simulated/ledger.ts";
import type { TransactionSender } from "../../chain/transaction-sender.ts";

// Where a payout's money moves: the sandbox's simulated ledger, or a live network through the
// nonce-ordered, record-before-broadcast sender. The payout service sees only this interface.

export interface SendOutcome {
  txHash: string;
  status: "success" | "reverted" | "pending";
  error: string | null;
}

export interface PayoutChannel {
  balance(address: Hex, token: ChainToken): Promise<bigint>;
  /** For the EOA path: ETH needed for gas of one transfer, or null when gas is not a concern. */
  gasRequired(token: ChainToken): Promise<bigint | null>;
  send(
    payoutId: string,
    privateKey: Hex,
    from: Hex,
    to: Hex,
    token: ChainToken,
    amount: bigint,
  ): Promise<SendOutcome>;
}

export class LedgerChannel implements PayoutChannel {
  readonly #ledger: SimulatedLedger;

  constructor(ledger: SimulatedLedger) {
    this.#ledger = ledger;
  }

  balance(address: Hex, token: ChainToken): Promise<bigint> {
    return this.#ledger.balance(address, token);
  }

  async gasRequired(): Promise<bigint | null> {
    return null; // the simulated ledger charges no gas
  }

  async send(
    payoutId: string,
    _key: Hex,
    from: Hex,
    to: Hex,
    token: ChainToken,
    amount: bigint,
  ): Promise<SendOutcome> {
    const result = await this.#ledger.transfer({ from, to, token, amount, reference: `payout:${payoutId}` });
    return {
      txHash: result.txHash,
      status: result.status,
      error: result.status === "reverted" ? result.error : null,
    };
  }
}

export class NetworkChannel implements PayoutChannel {
  readonly #network: Network;
  readonly #sender: TransactionSender;

  constructor(network: Network, sender: TransactionSender) {
    this.#network = network;
    this.#sender = sender;
  }

  balance(address: Hex, token: ChainToken): Promise<bigint> {
    return this.#network.balance(address, token);
  }

  gasRequired(token: ChainToken): Promise<bigint | null> {
    return this.#network.transferGasCost(token);
  }

  async send(
    payoutId: string,
    key: Hex,
    from: Hex,
    to: Hex,
    token: ChainToken,
    amount: bigint,
  ): Promise<SendOutcome> {
    const [sent] = await this.#sender.send(key, from, [{ token, to, amount, purpose: "payout", payoutId }]);
    if (!sent) throw new Error("sender returned no transaction");
    if (sent.status === "success") return { txHash: sent.txHash, status: "success", error: null };
    if (sent.status === "reverted") {
      return { txHash: sent.txHash, status: "reverted", error: sent.error ?? "transaction reverted" };
    }
    return { txHash: sent.txHash, status: "pending", error: null };
  }
}
