import type { RawBuilder } from "kysely";
import type { PreparedOperation, SmartAccounts } from "../../chain/evm/smart-accounts.ts";
import type { ChainToken, Hex, Network } from "../../chain/network.ts";
import { RecordRefused, type SubmittedTransfer } from "../../chain/sent-types.ts";
import { type LedgerTransfer, type SimulatedLedger, sandboxTxHash } from "../../chain/simulated/ledger.ts";
import type { TransactionSender } from "../../chain/transaction-sender.ts";

// Where a payout's money moves: the sandbox's simulated ledger, or a live network through the
// nonce-ordered, record-before-broadcast sender. The payout service sees only this interface.

export interface SendOutcome {
  txHash: string;
  userOpHash?: string;
  status: "success" | "reverted" | "pending";
  error: string | null;
}

/** A payout handed to its channel: `outcome` resolves with how it ended. */
export interface Submission {
  outcome: Promise<SendOutcome>;
}

/** A payout that may no longer be sent (the reconciler ended it); nothing was recorded or sent. */
export class PayoutNotSendable extends Error {
  override name = "PayoutNotSendable";
  readonly code = "PAYOUT_NOT_SENDABLE";
}

/**
 * What must hold when a payout's money is committed, checked where it is recorded; each throws
 * PayoutNotSendable when the payout may no longer be sent.
 */
export interface SendFences {
  /** Claims the payout in the statement that records its signed transaction (EOA). */
  claim: RawBuilder<unknown>;
  /** Records a smart wallet payout's signed user operation before it goes to the bundler. */
  recordOperation(userOpHash: string, operation: string): Promise<void>;
}

/** A wallet's balances, with its mined nonce where they were read at one block of a network. */
export interface WalletFunds {
  balances: Partial<Record<ChainToken, bigint>>;
  minedNonce: number | null;
}

async function balancesOf(channel: ChannelBase, address: Hex, tokens: readonly ChainToken[]) {
  const values = await Promise.all(tokens.map((token) => channel.balance(address, token)));
  const funds: WalletFunds = { balances: {}, minedNonce: null };
  for (const [i, token] of tokens.entries()) funds.balances[token] = values[i];
  return funds;
}

const settled = (outcome: SendOutcome): Submission => ({ outcome: Promise.resolve(outcome) });

interface ChannelBase {
  /**
   * A wallet's transfers can be sent one after the other without waiting for the previous one's
   * outcome (nonce order, `submit` resolves once broadcast): the payout service may then start the
   * wallet's next payout while this one is mined.
   */
  readonly pipelined: boolean;
  balance(address: Hex, token: ChainToken): Promise<bigint>;
}

/** A channel that sends transactions or user operations to a network. */
export interface SendingChannel extends ChannelBase {
  readonly kind: "network";
  /** Balances of `tokens` for a payout's checks (with the mined nonce, on a pipelined channel). */
  funds(address: Hex, tokens: readonly ChainToken[]): Promise<WalletFunds>;
  /** Where the sending wallet pays gas (the EOA path): ETH needed for one transfer's gas. */
  gasRequired?(token: ChainToken): Promise<bigint>;
  /**
   * Starts preparing and signing a transfer while the payout's checks run (smart wallets: a
   * user operation), to hand to `submit`. Nothing is sent or recorded: one prepared for a payout
   * that is then refused is dropped.
   */
  prepare?(
    signingKey: () => Promise<Hex>,
    to: Hex,
    token: ChainToken,
    amount: bigint,
  ): Promise<PreparedOperation>;
  /** `prepared` is what `prepare` started for this transfer. */
  submit(
    payoutId: string,
    /** The sending wallet's key (decrypted on demand). */
    signingKey: () => Promise<Hex>,
    from: Hex,
    to: Hex,
    token: ChainToken,
    amount: bigint,
    fences: SendFences,
    prepared?: Promise<PreparedOperation>,
  ): Promise<Submission>;
}

export type PayoutChannel = SendingChannel | LedgerChannel;

/**
 * The sandbox's simulated ledger (D3). Its transfers are rows of our own database, instant and
 * final: the payout service records a payout, moves its money and completes it in one
 * transaction (repo.recordSandboxPayouts) instead of sending anything.
 */
export class LedgerChannel implements ChannelBase {
  readonly kind = "ledger";
  // Instant and final: nothing to overlap, and the breaker sees each outcome before the next.
  readonly pipelined = false;
  readonly #ledger: SimulatedLedger;
  readonly #smartWallet: boolean;

  /** `smartWallet`: the sandbox twin of a user-operation payout, which also reports a userOpHash. */
  constructor(ledger: SimulatedLedger, options: { smartWallet?: boolean } = {}) {
    this.#ledger = ledger;
    this.#smartWallet = options.smartWallet ?? false;
  }

  balance(address: Hex, token: ChainToken): Promise<bigint> {
    return this.#ledger.currentBalance(address, token);
  }

  /** A payout's ledger transfer (its tx hash derives from the payout id) and user operation twin. */
  transferOf(
    payoutId: string,
    from: Hex,
    to: Hex,
    token: ChainToken,
    amount: bigint,
  ): { transfer: LedgerTransfer; userOpHash: Hex | null } {
    return {
      transfer: { from, to, token, amount, reference: `payout:${payoutId}` },
      userOpHash: this.#smartWallet ? sandboxTxHash(`user-operation:${payoutId}`) : null,
    };
  }
}

export class NetworkChannel implements SendingChannel {
  readonly kind = "network";
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

  async funds(address: Hex, tokens: readonly ChainToken[]): Promise<WalletFunds> {
    // One block for balances and nonce: the payout service tells by the nonce which of the
    // wallet's transactions in flight that balance already paid for.
    return this.#network.accountAt(address, tokens);
  }

  gasRequired(token: ChainToken): Promise<bigint> {
    return this.#network.transferGasCost(token);
  }

  async submit(
    payoutId: string,
    signingKey: () => Promise<Hex>,
    from: Hex,
    to: Hex,
    token: ChainToken,
    amount: bigint,
    fences: SendFences,
  ): Promise<Submission> {
    let submitted: SubmittedTransfer[];
    try {
      submitted = await this.#sender.submit(
        await signingKey(),
        from,
        [{ token, to, amount, purpose: "payout", payoutId }],
        { claim: fences.claim },
      );
    } catch (err) {
      if (err instanceof RecordRefused) throw new PayoutNotSendable(`payout ${payoutId}: ${err.message}`);
      throw err;
    }
    const outcome = this.#sender.receipts(submitted).then(([sent]): SendOutcome => {
      if (!sent) throw new Error("sender returned no transaction");
      if (sent.status === "success") return { txHash: sent.txHash, status: "success", error: null };
      if (sent.status === "reverted") {
        return { txHash: sent.txHash, status: "reverted", error: sent.error ?? "transaction reverted" };
      }
      return { txHash: sent.txHash, status: "pending", error: null };
    });
    return { outcome };
  }
}

/**
 * Live smart wallet payouts: one user operation from the workspace's SimpleAccount, signed by its
 * EOA, gas paid by the paymaster, recorded (hash and signed body) before it goes to the bundler.
 */
export class SmartWalletChannel implements SendingChannel {
  readonly kind = "network";
  // Not pipelined: each payout's outcome is known (and counted by the breaker) before the next
  // one is sent. Nonces do not order them: each operation has a nonce key of its own.
  readonly pipelined = false;
  readonly #network: Network;
  readonly #accounts: SmartAccounts;

  constructor(network: Network, accounts: SmartAccounts) {
    this.#network = network;
    this.#accounts = accounts;
  }

  balance(address: Hex, token: ChainToken): Promise<bigint> {
    return this.#network.balance(address, token);
  }

  funds(address: Hex, tokens: readonly ChainToken[]): Promise<WalletFunds> {
    return balancesOf(this, address, tokens);
  }

  async prepare(
    signingKey: () => Promise<Hex>,
    to: Hex,
    token: ChainToken,
    amount: bigint,
  ): Promise<PreparedOperation> {
    return this.#accounts.prepare(await signingKey(), [{ token, to, amount }]);
  }

  async submit(
    _payoutId: string,
    signingKey: () => Promise<Hex>,
    _from: Hex,
    to: Hex,
    token: ChainToken,
    amount: bigint,
    fences: SendFences,
    prepared?: Promise<PreparedOperation>,
  ): Promise<Submission> {
    return settled(
      await this.#send(
        signingKey,
        to,
        token,
        amount,
        (hash, op) => fences.recordOperation(hash, op),
        prepared,
      ),
    );
  }

  async #send(
    signingKey: () => Promise<Hex>,
    to: Hex,
    token: ChainToken,
    amount: bigint,
    record: (userOpHash: string, operation: string) => Promise<void>,
    preparedAhead?: Promise<PreparedOperation>,
  ): Promise<SendOutcome> {
    const calls = [{ token, to, amount }];
    const prepareAndSend = async (options: { estimate?: "bundler"; nonceKey?: bigint } = {}) => {
      let prepared: PreparedOperation;
      try {
        prepared = await (options.estimate === undefined && preparedAhead
          ? preparedAhead
          : this.#accounts.prepare(await signingKey(), calls, options));
      } catch (err) {
        return {
          prepared: undefined,
          failure: `bundler or paymaster failure: ${(err as Error).message.split("\n")[0]}`,
        };
      }
      await record(prepared.userOpHash, prepared.serialized);
      return { prepared, outcome: await this.#accounts.send(prepared) };
    };
    let attempt = await prepareAndSend();
    if (
      attempt.outcome?.status === "reverted" &&
      attempt.outcome.refused &&
      attempt.prepared?.gasFrom === "known"
    ) {
      // Refused with gas limits reused from an earlier operation: never in the bundler's mempool.
      // Once more with the bundler's own estimate, recorded before it is sent; it takes the same
      // nonce (key and sequence 0), so at most one of the two can ever be included.
      attempt = await prepareAndSend({ estimate: "bundler", nonceKey: attempt.prepared.nonceKey });
    }
    const { outcome } = attempt;
    if (!outcome) return { txHash: "", status: "reverted", error: attempt.failure ?? "bundler failure" };
    if (outcome.status === "success") {
      return { txHash: outcome.txHash, userOpHash: outcome.userOpHash, status: "success", error: null };
    }
    if (outcome.status === "reverted") {
      return {
        txHash: outcome.txHash ?? "",
        userOpHash: outcome.userOpHash,
        status: "reverted",
        error: outcome.error,
      };
    }
    return { txHash: "", userOpHash: outcome.userOpHash, status: "pending", error: null };
  }
}
