import type { ChainToken, EventLog, Hex, OnNetwork } from "../chain/network.ts";
import { type LedgerTransfer, SimulatedLedger, sandboxTxHash } from "../chain/simulated/ledger.ts";
import {
  balancesOf,
  type Move,
  type MoveHooks,
  type MoveOutcome,
  MoveRefused,
  type Rail,
  type RecordedMove,
  type Submission,
  type WalletFunds,
} from "./rail.ts";

// The sandbox's simulated ledger (D3) as a rail. Its transfers are rows of our own database,
// instant and final, so nothing is sent: the rail hands its transfers to the caller, who writes
// them in ONE statement with its own record (a sandbox payout with its event, shared with the
// payouts asked for together), and that statement's verdict is the move's outcome. The same
// rail, as the twin of a smart account, also names a user operation hash.

export class LedgerRail implements Rail {
  // Instant and final: nothing to overlap, and the breaker sees each outcome before the next.
  readonly pipelined = false;
  /** The simulated network whose balances the rail moves (sandbox-a or sandbox-b, D22). */
  readonly network: OnNetwork;
  readonly #ledger: SimulatedLedger;
  readonly #smartAccount: boolean;

  /** `smartAccount`: the sandbox twin of a user-operation rail, which also reports a userOpHash. */
  constructor(ledger: SimulatedLedger, network: string, options: { smartAccount?: boolean } = {}) {
    this.#ledger = ledger;
    this.network = { environment: "sandbox", id: network };
    this.#smartAccount = options.smartAccount ?? false;
  }

  balance(address: Hex, token: ChainToken): Promise<bigint> {
    return this.#ledger.currentBalance(this.network.id, address, token);
  }

  funds(address: Hex, tokens: readonly ChainToken[]): Promise<WalletFunds> {
    return balancesOf(this, address, tokens);
  }

  gasRequired(): undefined {
    return undefined;
  }

  gasCost(): undefined {
    return undefined;
  }

  prepare(): undefined {
    return undefined;
  }

  /** Nothing is ever left open: a ledger move is final in the statement that makes it. */
  async reconcile(): Promise<void> {}

  /** A ledger move is recorded and final in one statement: nothing is ever left to look at. */
  async recorded(): Promise<RecordedMove> {
    return { state: "none" };
  }

  /** No contract runs on the ledger: its moves emit nothing. */
  async logsOf(): Promise<EventLog[]> {
    return [];
  }

  async submit(move: Move, hooks: MoveHooks): Promise<Submission> {
    if (!hooks.recordWithTransfers) throw new Error("the simulated ledger needs recordWithTransfers");
    // No contract runs on the ledger: a sandbox swap hands it the transfer to its simulated pool.
    if (move.legs.some((leg) => leg.call)) throw new Error("the simulated ledger moves transfers only");
    const owner = move.payoutId ? `payout:${move.payoutId}` : `payment:${move.paymentId}`;
    const transfers: LedgerTransfer[] = move.legs.map((leg) => ({
      network: this.network.id,
      from: move.from,
      to: leg.to,
      token: leg.token,
      amount: leg.amount,
      // A payout's one transfer keeps the reference its hash has always derived from.
      reference: move.legs.length === 1 ? owner : `${owner}:${leg.purpose}`,
    }));
    const userOpHash = this.#smartAccount ? sandboxTxHash(`user-operation:${move.payoutId}`) : null;
    const record = await hooks.recordWithTransfers({ transfers, userOpHash });
    if (record.outcome === "refused") throw new MoveRefused("the ledger move was not recorded");
    const first = transfers[0]?.reference ?? owner;
    const result = SimulatedLedger.resultOf(first, record.outcome);
    const legs = transfers.map((t, i) => ({
      purpose: move.legs[i]?.purpose ?? "",
      txHash: sandboxTxHash(t.reference),
      mined: result.status === "success",
    }));
    const outcome: MoveOutcome = {
      status: result.status,
      txHash: result.txHash,
      ...(userOpHash ? { userOpHash } : {}),
      legs,
      error: result.status === "reverted" ? result.error : null,
    };
    return { outcome: Promise.resolve(outcome) };
  }
}
