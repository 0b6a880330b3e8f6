import { answeredWithError } from "../chain/evm/bundler-rpc.ts";
import type { OperationOutcome, PreparedOperation, SmartAccounts } from "../chain/evm/smart-accounts.ts";
import type { ChainToken, EventLog, Hex, Network, OnNetwork } from "../chain/network.ts";
import { firstLineOf } from "../domain/errors.ts";
import { KeyedQueue } from "../platform/concurrency/keyed-queue.ts";
import {
  balancesOf,
  type Move,
  type MoveHooks,
  type MoveOutcome,
  type MoveOwner,
  MoveRefused,
  type Prepared,
  type Rail,
  type RecordedMove,
  type RecordedOperation,
  type Submission,
  type WalletFunds,
} from "./rail.ts";

// A workspace's smart account (ERC-4337, D11) as a rail: every leg of a move in ONE user
// operation (atomic), signed by the workspace EOA, gas paid by the paymaster, recorded (hash and
// signed body) before it goes to the bundler. A recorded operation is sent again after a crash
// (`recorded`): the bundler includes it at most once.

export class SmartAccountRail implements Rail {
  // Not pipelined: each move's outcome is known (and counted by the breaker) before the next is
  // sent. Nonces do not order them: each operation has a nonce key of its own.
  readonly pipelined = false;
  readonly #network: Network;
  readonly #accounts: SmartAccounts;
  /** Accounts this process has seen a move of included: deployed, so their moves run side by side. */
  readonly #deployed = new Set<Hex>();
  /**
   * Until then, one move at a time per account: each of several moves prepared together (the
   * settlements of a new wallet's first payments) would carry the account's deployment, and the
   * EntryPoint deploys an account once (AA10): all but one would fail.
   */
  readonly #firstMoves = new KeyedQueue();

  constructor(network: Network, accounts: SmartAccounts) {
    this.#network = network;
    this.#accounts = accounts;
  }

  get network(): OnNetwork {
    return this.#network;
  }

  balance(address: Hex, token: ChainToken): Promise<bigint> {
    return this.#network.balance(address, token);
  }

  funds(address: Hex, tokens: readonly ChainToken[]): Promise<WalletFunds> {
    return balancesOf(this, address, tokens);
  }

  /** Sponsored: the wallet pays no gas. */
  gasRequired(): undefined {
    return undefined;
  }

  gasCost(): undefined {
    return undefined;
  }

  /**
   * The operation's legs prepared and signed ahead, as submit's first attempt sends them: with
   * limits reused where known, or for a background move the bundler's own estimate.
   */
  async prepare(move: Move): Promise<Prepared> {
    return this.#accounts.prepare(await move.signingKey(), callsOf(move), firstAttempt(move));
  }

  /** A recorded operation sent again: a no-op if it was included; one never includable fails. */
  async recorded(_owner: MoveOwner, operation: RecordedOperation | null): Promise<RecordedMove> {
    if (!operation) return { state: "none" };
    const sent = await this.#accounts.sendAgain(operation);
    const outcome = moveOutcomeOf(sent, operation.purposes ?? []);
    if (outcome.status === "pending") return { state: "open" };
    return { state: "ended", outcome, byReceipt: false };
  }

  /** Recorded operations are sent again when their owners' reconcilers ask (`recorded`). */
  async reconcile(): Promise<void> {}

  /** The operation's own events: its bundle's transaction carries other operations' too. */
  logsOf(mined: { txHash: string; userOpHash?: string }): Promise<EventLog[]> {
    if (!mined.userOpHash)
      throw new Error(`a smart account's move in ${mined.txHash} names no user operation`);
    return this.#accounts.operationLogs(mined.userOpHash as Hex);
  }

  async submit(move: Move, hooks: MoveHooks, preparedAhead?: Promise<Prepared>): Promise<Submission> {
    if (this.#deployed.has(move.from)) return this.#submit(move, hooks, preparedAhead);
    return this.#firstMoves.run(move.from, async () => {
      // Deployed by the move before this one: what was prepared ahead may still carry the deployment.
      const ahead = this.#deployed.has(move.from) ? undefined : preparedAhead;
      const submission = await this.#submit(move, hooks, ahead);
      // Outcomes here are settled already (the operation was sent and its receipt awaited).
      if ((await submission.outcome).status === "success") this.#deployed.add(move.from);
      return submission;
    });
  }

  async #submit(move: Move, hooks: MoveHooks, preparedAhead?: Promise<Prepared>): Promise<Submission> {
    if (hooks.persist && !(await hooks.persist())) throw new MoveRefused("not recorded by its caller");
    const record = hooks.recordOperation;
    if (!record) throw new Error("a smart account move needs recordOperation");
    const legs = move.legs.map((leg) => leg.purpose);
    type Attempt =
      | { failure: string; answered: boolean }
      | { prepared: PreparedOperation; outcome: OperationOutcome };
    const prepareAndSend = async (
      options: { estimate?: "bundler"; nonceKey?: bigint } = {},
    ): Promise<Attempt> => {
      let prepared: PreparedOperation;
      try {
        // The first attempt is what was prepared ahead, if anything was (prepare).
        prepared = await (options.nonceKey === undefined && preparedAhead
          ? preparedAhead
          : this.#accounts.prepare(await move.signingKey(), callsOf(move), options));
      } catch (err) {
        return {
          failure: `bundler or paymaster failure: ${firstLineOf(err)}`,
          answered: answeredWithError(err),
        };
      }
      if (!(await record(prepared.userOpHash, prepared.serialized))) {
        throw new MoveRefused("its caller would not record the operation");
      }
      return { prepared, outcome: await this.#accounts.send(prepared) };
    };
    let attempt = await prepareAndSend(firstAttempt(move));
    if (
      "outcome" in attempt &&
      attempt.outcome.status === "reverted" &&
      attempt.outcome.refused &&
      attempt.prepared.gasFrom === "known"
    ) {
      // Refused with gas limits reused from an earlier operation: never in the bundler's mempool.
      // Once more with the bundler's own estimate, recorded before it is sent; it takes the same
      // nonce (key and sequence 0), so at most one of the two can ever be included.
      attempt = await prepareAndSend({ estimate: "bundler", nonceKey: attempt.prepared.nonceKey });
    }
    if (move.background && mayPass(attempt)) {
      // Nobody waits on it: a bundler or paymaster that did not answer is asked again next time
      // (the recorded operation is sent again; one never prepared is prepared anew).
      const error =
        "failure" in attempt
          ? attempt.failure
          : attempt.outcome.status === "reverted"
            ? attempt.outcome.error
            : null;
      return { outcome: Promise.resolve({ status: "pending", txHash: "", legs: [], error }) };
    }
    const outcome: MoveOutcome =
      "outcome" in attempt
        ? moveOutcomeOf(attempt.outcome, legs)
        : { status: "reverted", txHash: "", legs: [], error: attempt.failure, unsent: true };
    return { outcome: Promise.resolve(outcome) };
  }
}

/**
 * How a move's first operation is prepared. Nobody waits on a background move: the bundler's own
 * estimate, and no second operation to record should the bundler refuse one with reused limits.
 */
function firstAttempt(move: Move): { estimate?: "bundler" } {
  return move.background ? { estimate: "bundler" } : {};
}

/**
 * The attempt failed without an answer from the bundler or the paymaster (unreachable, an HTTP
 * error such as 429, a timeout): nothing says the operation is wrong, and the failure may pass.
 * An operation the bundler refused, or one included and reverted, has its answer.
 */
function mayPass(attempt: { failure: string; answered: boolean } | { outcome: OperationOutcome }): boolean {
  if ("failure" in attempt) return !attempt.answered;
  const { outcome } = attempt;
  return outcome.status === "reverted" && outcome.txHash === null && !outcome.refused;
}

function callsOf(move: Move) {
  return move.legs.map((leg) => ({
    token: leg.token,
    to: leg.to,
    amount: leg.amount,
    ...(leg.call ? { call: leg.call } : {}),
  }));
}

/** Every leg rides in the operation's one transaction. */
function moveOutcomeOf(outcome: OperationOutcome, purposes: string[]): MoveOutcome {
  const { userOpHash } = outcome;
  if (outcome.status === "pending")
    return { status: "pending", txHash: "", userOpHash, legs: [], error: null };
  const txHash = outcome.txHash ?? "";
  const legs = purposes.map((purpose) => ({ purpose, txHash, mined: outcome.status === "success" }));
  if (outcome.status === "success") return { status: "success", txHash, userOpHash, legs, error: null };
  return { status: "reverted", txHash, userOpHash, legs, error: outcome.error };
}
