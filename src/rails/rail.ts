import type { RawBuilder } from "kysely";
import type { PreparedOperation } from "../chain/evm/smart-accounts.ts";
import type { ChainToken, ContractCall, EventLog, Hex, OnNetwork } from "../chain/network.ts";
import type { LedgerTransfer } from "../chain/simulated/ledger.ts";

// The Rail port: the one way money leaves a workspace wallet. A move is "these amounts of these
// tokens from this wallet to these addresses" (one leg for a payout; the net and the fee, later
// splits, for a settlement). Each implementation owns how its money moves and how a move it
// recorded is finished after a crash: the sandbox's simulated ledger (ledger-rail.ts), a
// workspace EOA (eoa-rail.ts: nonce-ordered, recorded before broadcast), a smart account
// (smart-account-rail.ts: one sponsored user operation for all legs). Callers hand every rail the
// same hooks (MoveHooks) and never ask which one they hold: each rail calls the hooks it needs.
// Every move goes through the transfer engine (modules/transfers), the one caller.

/** One transfer of a move. `purpose` names it in the records (payout, settlement_net, …). */
export interface Leg {
  token: ChainToken;
  to: Hex;
  amount: bigint;
  purpose: string;
  /**
   * A contract call instead of a transfer (a swap's approval and router call): `token` and
   * `amount` are what it may take from the wallet, reserved while it is on its way. Rails on a
   * chain make the call; the simulated ledger moves transfers only.
   */
  call?: ContractCall;
}

export interface Move {
  from: Hex;
  /** The key that signs for the wallet (a smart account's owner EOA), decrypted on demand. */
  signingKey: () => Promise<Hex>;
  legs: Leg[];
  /** What the move belongs to; recorded with its transactions. */
  payoutId?: string;
  paymentId?: string;
  /**
   * Nobody waits for this move (a settlement): a rail may trade latency for certainty (a smart
   * account takes the bundler's own gas estimate rather than reusing an earlier one).
   */
  background?: boolean;
}

/** The outcome of a move: success once every leg is mined with a success receipt. */
export interface MoveOutcome {
  status: "success" | "reverted" | "pending";
  /**
   * On success the last leg's transaction, which completes the move (a swap's router call after
   * its approval); otherwise the one that reverted, or the first. A smart account's: the one that
   * carried its operation.
   */
  txHash: string;
  userOpHash?: string;
  /** Each leg's transaction, by purpose; `mined` once it is mined with a success receipt. */
  legs: Array<{ purpose: string; txHash: string; mined: boolean }>;
  /** Why it reverted; on a pending background move, what failed on the way (it is tried again). */
  error: string | null;
  /** Reverted before anything was recorded or sent (the bundler would not prepare it, say). */
  unsent?: true;
  /**
   * It failed in its recipient's code, not in the wallet's sending: plain ETH that a contract
   * refused or ran out of its capped gas on (a reverted receipt), or that the node's estimate
   * says it would refuse (then nothing was sent). Whether the breaker counts it is the
   * transfer's kind's (domain/payout-state.ts).
   */
  cause?: "recipient";
}

/** A move handed to its rail: `outcome` settles with how it ended. */
export interface Submission {
  outcome: Promise<MoveOutcome>;
}

/**
 * The caller's side of recording a move, in the rail's own statement or transaction. A rail calls
 * the ones its way of moving money needs and ignores the others.
 */
export interface MoveHooks {
  /**
   * Records what the move belongs to (a payout, processing), once the caller's checks passed:
   * called before anything is signed or sent; false: not recorded, the caller answers why
   * (MoveRefused). The simulated ledger calls `recordWithTransfers` instead. `gasUnits`: where
   * the wallet pays gas (an EOA), the gas limits its transactions will be signed with, in all,
   * for the balance check to reserve (0 when its recipient refuses it: nothing will be sent).
   */
  persist?: (gasUnits?: Promise<bigint>) => Promise<boolean>;
  /**
   * Signed transactions (EOA): a data-modifying statement returning rows, run in the statement
   * that records them; no row, nothing recorded (MoveRefused).
   */
  claim?: RawBuilder<unknown>;
  /** A signed user operation (smart account), before it is sent; false: it may not be (MoveRefused). */
  recordOperation?: (userOpHash: string, operation: string) => Promise<boolean>;
  /**
   * The simulated ledger: the caller's own record written in ONE statement with the ledger's
   * transfers (the rail's contribution), e.g. a sandbox payout with its event. Its answer is the
   * move's outcome there.
   */
  recordWithTransfers?: (contribution: LedgerContribution) => Promise<LedgerRecord>;
}

/** What the simulated ledger adds to the caller's statement. */
export interface LedgerContribution {
  transfers: LedgerTransfer[];
  /** The sandbox twin of a smart account's user operation (its hash), else null. */
  userOpHash: Hex | null;
}

/** What the caller's one-statement record of a ledger move found. */
export type LedgerRecord =
  | { outcome: "success" }
  | { outcome: "failure_address" }
  /** Not recorded: the caller answers it (insufficient balance, an idempotency key taken). */
  | { outcome: "refused" };

/** A wallet's balances, with its mined nonce where they were read at one block of a network. */
export interface WalletFunds {
  balances: Partial<Record<ChainToken, bigint>>;
  minedNonce: number | null;
}

/** A move signed ahead by the one rail that prepares (a smart account's user operation). */
export type Prepared = PreparedOperation;

/** A move a rail signed earlier, to finish from what the network says (the reconcilers). */
export interface RecordedOperation {
  userOpHash: Hex;
  serialized: string;
  /** The purposes of the legs it carries, named in the outcome (all in its one transaction). */
  purposes?: string[];
}

/**
 * Whose move a rail's records are asked about: a transfer of the engine's, or a payment's
 * settlement (its legs are recorded under the payment until settlement is a kind of the engine).
 */
export type MoveOwner = { transferId: string } | { paymentId: string };

/**
 * What a rail's records say of a move it may have sent for a transfer, for the reconciler:
 * `none`, nothing recorded (never sent); `open`, recorded and not final yet; `ended`, its
 * outcome, where `byReceipt` says a reverted one reverted in its own receipt (not replaced).
 */
export type RecordedMove =
  | { state: "none" }
  | { state: "open" }
  | { state: "ended"; outcome: MoveOutcome; byReceipt: boolean };

/** Nothing was recorded and nothing sent: a hook's fence refused the move. */
export class MoveRefused extends Error {
  override name = "MoveRefused";
  readonly code = "MOVE_REFUSED";
}

export interface Rail {
  /**
   * A wallet's moves can follow each other without waiting for the previous one's outcome (nonce
   * order; `submit` resolves once broadcast): a caller may start the next while this one is mined.
   */
  readonly pipelined: boolean;
  /** The network its moves are on (D22): where the chain records of its moves are kept. */
  readonly network: OnNetwork;
  balance(address: Hex, token: ChainToken): Promise<bigint>;
  /** Balances of `tokens` for a move's checks (with the mined nonce, on a pipelined rail). */
  funds(address: Hex, tokens: readonly ChainToken[]): Promise<WalletFunds>;
  /** ETH one transfer of `token` costs the sending wallet in gas; undefined where gas is sponsored. */
  gasRequired(token: ChainToken): Promise<bigint> | undefined;
  /** ETH `units` of gas cost the sending wallet (a move of contract calls); undefined where sponsored. */
  gasCost(units: bigint): Promise<bigint> | undefined;
  /**
   * Starts preparing and signing `move` while the caller's checks run, to hand to `submit`.
   * Nothing is sent or recorded: one prepared for a move that is then refused is dropped.
   */
  prepare(move: Move): Promise<Prepared> | undefined;
  /**
   * Records and sends `move` (after `hooks.persist`), and resolves once it is on its way;
   * rejects only when nothing was recorded (MoveRefused when a hook refused). `prepared` is what
   * `prepare` started for it.
   */
  submit(move: Move, hooks: MoveHooks, prepared?: Promise<Prepared>): Promise<Submission>;
  /**
   * Brings what this rail recorded and its sender left open to a final state from what the
   * network says (the chain job runs it before settling and reconciling payouts).
   */
  reconcile(): Promise<void>;
  /**
   * The events a completed move emitted (what a kind reads its results from: a swap's amounts):
   * its transaction's, or its user operation's alone (not the rest of its bundle's).
   */
  logsOf(mined: { txHash: string; userOpHash?: string }): Promise<EventLog[]>;
  /**
   * What this rail recorded for `owner`'s move says now (its records are its own: nobody else
   * reads them). `operation`: the user operation recorded with the owner, where the rail signs
   * one; a recorded one is sent again (a no-op if included), and one that can never be included
   * ends reverted.
   */
  recorded(owner: MoveOwner, operation: RecordedOperation | null): Promise<RecordedMove>;
}

/** A wallet's balances read token by token (no block to tie them to: no mined nonce). */
export async function balancesOf(
  rail: Pick<Rail, "balance">,
  address: Hex,
  tokens: readonly ChainToken[],
): Promise<WalletFunds> {
  const values = await Promise.all(tokens.map((token) => rail.balance(address, token)));
  const funds: WalletFunds = { balances: {}, minedNonce: null };
  for (const [i, token] of tokens.entries()) funds.balances[token] = values[i];
  return funds;
}
