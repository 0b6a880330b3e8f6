import { createHash } from "node:crypto";
import DataLoader from "dataloader";
import { type CompiledQuery, type Kysely, type RawBuilder, sql } from "kysely";
import { coalescedLookup } from "../../platform/db/coalesced-lookup.ts";
import { columnList } from "../../platform/db/columns.ts";
import type { DatabaseSchema } from "../../platform/db/schema.ts";
import type { ChainToken, Hex } from "../network.ts";
import { authorizationAndBalance, authorizationTx } from "./authorizations.ts";

// The sandbox's simulated ledger (D3): append-only entries per network, address and token in our
// own database (a balance is their sum, kept in a few parts per wallet by migration 047, so credits
// never wait on each other and a debit does not read the wallet's history), transfers that debit
// and credit atomically, transaction hashes of the real format derived from a caller's unique
// reference (the same payout always gets the same hash), and a documented magic destination
// that makes a transfer fail like an on-chain revert, so the circuit breaker can be exercised
// without a chain. A product feature, not a test double. Its networks (sandbox-a, sandbox-b: D22,
// simulated/networks.ts) keep separate balances: money never crosses from one to the other.

/** Payouts to this address fail in the sandbox (an on-chain revert). */
export const SANDBOX_FAILURE_ADDRESS = "0x000000000000000000000000000000000000dEaD";

type Db = Kysely<DatabaseSchema>;

export interface LedgerTransfer {
  /** The simulated network it moves on. */
  network: string;
  from: Hex;
  to: Hex;
  token: ChainToken;
  amount: bigint;
  /** Unique per transfer; the hash is derived from it. */
  reference: string;
}

export interface LedgerCredit {
  network: string;
  address: string;
  token: ChainToken;
  amount: bigint;
  /** Unique per credit; the hash is derived from it. */
  reference: string;
}

export type LedgerResult =
  | { txHash: Hex; status: "success" }
  | { txHash: Hex; status: "reverted"; error: string };

/**
 * The simulated transaction hash of a transfer or credit: 32 bytes derived from its reference, so
 * the same reference always names the same transaction. SHA-256 from node:crypto, not keccak: no
 * chain ever checks these hashes, and keccak in JavaScript was ~7% of the CPU of a sandbox payment
 * creation.
 */
export function sandboxTxHash(reference: string): Hex {
  return `0x${createHash("sha256").update(`sandbox:${reference}`).digest("hex")}`;
}

const FAILURE_ADDRESS = SANDBOX_FAILURE_ADDRESS.toLowerCase();
/** The columns of `transfer_req` (decisionCtes), as its unnest names them. */
const REQUEST_COLUMNS = [
  "tx_hash",
  "network",
  "from_address",
  "to_address",
  "token_symbol",
  "amount",
  "memo",
  "failing",
  "pos",
] as const;
const MAX_BATCH = 256;
export type TransferOutcome = "success" | "insufficient" | "failure_address";

export class SimulatedLedger {
  readonly #db: Db;
  /** Transfers asked for together (one round of I/O) are made by one statement. */
  readonly #transfers: DataLoader<LedgerTransfer, LedgerResult>;
  /** Balance reads asked for together are one query (not in a caller's transaction). */
  readonly #balances: (key: string) => Promise<bigint | undefined>;

  constructor(db: Db) {
    this.#db = db;
    this.#transfers = new DataLoader((batch) => this.#transferBatch(batch), {
      cache: false,
      maxBatchSize: MAX_BATCH,
      batchScheduleFn: (dispatch) => setImmediate(dispatch),
    });
    this.#balances = coalescedLookup((keys: readonly string[]) => this.#readBalances(keys));
  }

  /** The balance now, read together with the other balances asked for in this round of I/O. */
  async currentBalance(network: string, address: string, token: ChainToken): Promise<bigint> {
    return (await this.#balances(`${network} ${address.toLowerCase()} ${token}`)) ?? 0n;
  }

  async #readBalances(keys: readonly string[]): Promise<Map<string, bigint>> {
    // Distinct: a wallet asked for twice must not be joined (and summed) twice.
    const wallets = [...new Set(keys)].map((key) => key.split(" ") as [string, string, string]);
    const column = (i: 0 | 1 | 2) => wallets.map((w) => w[i]);
    // A sum per wallet through the (network, address, token_symbol) index: a join would let the
    // planner hash the whole table.
    const rows = await sql<{ network: string; address: string; token_symbol: string; balance: string }>`
      SELECT w.network, w.address, w.token_symbol,
             (SELECT coalesce(sum(e.amount), 0) FROM ledger_balance_parts e
              WHERE e.network = w.network AND e.address = w.address
                AND e.token_symbol = w.token_symbol)::text AS balance
      FROM unnest(${column(0)}::text[], ${column(1)}::text[], ${column(2)}::text[])
           AS w(network, address, token_symbol)
    `.execute(this.#db);
    return new Map(rows.rows.map((r) => [`${r.network} ${r.address} ${r.token_symbol}`, BigInt(r.balance)]));
  }

  async balance(network: string, address: string, token: ChainToken, db: Db = this.#db): Promise<bigint> {
    const row = await db
      .selectFrom("ledger_balance_parts")
      .select(sql<string>`coalesce(sum(amount), 0)::text`.as("balance"))
      .where("network", "=", network)
      .where("address", "=", address.toLowerCase())
      .where("token_symbol", "=", token)
      .executeTakeFirst();
    return BigInt(row?.balance ?? "0");
  }

  /** A credit as CTEs (`ledger_credit`, `ledger_tx`, `ledger_entry`) of a caller's larger statement. */
  static creditCtes(credit: LedgerCredit): RawBuilder<unknown> {
    return SimulatedLedger.creditsCtes([credit]);
  }

  /** Several credits (at least one) as the CTEs of `creditCtes`. */
  static creditsCtes(credits: readonly LedgerCredit[]): RawBuilder<unknown> {
    // One array parameter per column: the same statement text for any number of credits.
    const column = <T>(pick: (c: LedgerCredit) => T) => credits.map(pick);
    return sql`
      ledger_credit AS (
        SELECT * FROM unnest(
          ${column((c) => sandboxTxHash(c.reference))}::text[],
          ${column((c) => c.network)}::text[],
          ${column((c) => c.address.toLowerCase())}::text[],
          ${column((c) => c.token)}::text[],
          ${column((c) => c.amount.toString())}::numeric[],
          ${column((c) => c.reference)}::text[]
        ) AS c(tx_hash, network, holder, token_symbol, amount, reference)
      ),
      ledger_tx AS (
        INSERT INTO ledger_transactions (tx_hash, network, from_address, to_address, token_symbol, amount, status, memo)
        SELECT tx_hash, network, NULL, holder, token_symbol, amount, 'success', reference FROM ledger_credit
      ),
      ledger_entry AS (
        INSERT INTO ledger_entries (network, address, token_symbol, amount, tx_hash)
        SELECT network, holder, token_symbol, amount, tx_hash FROM ledger_credit
      )`;
  }

  /** A credit as one statement for another module's transaction (a sandbox swap's proceeds). */
  creditStatement(credit: LedgerCredit): CompiledQuery {
    return sql`WITH ${SimulatedLedger.creditCtes(credit)} SELECT 1`.compile(this.#db);
  }

  /** Adds funds (faucet, sandbox payments received), in one statement; returns the new balance. */
  async credit(credit: LedgerCredit, db: Db = this.#db): Promise<bigint> {
    await sql`WITH ${SimulatedLedger.creditCtes(credit)} SELECT 1`.execute(db);
    return this.balance(credit.network, credit.address, credit.token, db);
  }

  /**
   * Debits `from` and credits `to` atomically, or records a reverted transfer (insufficient
   * balance, or the failure address). Transfers asked for together share one statement.
   */
  transfer(transfer: LedgerTransfer): Promise<LedgerResult> {
    return this.#transfers.load(transfer);
  }

  #transferBatch(batch: readonly LedgerTransfer[]): Promise<Array<LedgerResult | Error>> {
    return SimulatedLedger.inDebitRounds(
      batch,
      (transfer) => transfer,
      (round) => this.#transferRound(round),
    );
  }

  /**
   * Runs `batch` in rounds in which each wallet and token debits at most once (so that a round's
   * balance checks cannot overlap), each round by one call of `run`. A failed round is run again
   * one item at a time: its transaction wrote nothing, and an item that cannot be made fails
   * alone. Answers each item, in order.
   */
  static async inDebitRounds<T, R>(
    batch: readonly T[],
    transferOf: (item: T) => LedgerTransfer,
    run: (round: readonly T[]) => Promise<readonly R[]>,
  ): Promise<Array<R | Error>> {
    const results: Array<R | Error> = new Array(batch.length);
    let waiting = batch.map((item, index) => ({ item, index }));
    while (waiting.length > 0) {
      const debits = new Set<string>();
      const round: typeof waiting = [];
      const later: typeof waiting = [];
      for (const entry of waiting) {
        const key = debitLock(transferOf(entry.item));
        if (debits.has(key)) later.push(entry);
        else {
          debits.add(key);
          round.push(entry);
        }
      }
      const answer = async (entries: typeof round) => {
        const answers = await run(entries.map((entry) => entry.item));
        if (answers.length !== entries.length)
          throw new Error(`${answers.length} answers for ${entries.length} transfers`);
        return answers;
      };
      try {
        const outcomes = await answer(round);
        round.forEach((entry, i) => {
          results[entry.index] = outcomes[i] as R;
        });
      } catch (err) {
        if (round.length === 1) results[(round[0] as (typeof round)[number]).index] = asError(err);
        else
          await Promise.all(
            round.map(async (entry) => {
              results[entry.index] = await answer([entry]).then((r) => r[0] as R, asError);
            }),
          );
      }
      waiting = later;
    }
    return results;
  }

  /** One statement: locks the debited wallets, checks their balances and writes. */
  async #transferRound(transfers: readonly LedgerTransfer[]): Promise<LedgerResult[]> {
    const result = await sql<{ outcome: TransferOutcome }>`
      WITH ${SimulatedLedger.decisionCtes(transfers)},
      ${SimulatedLedger.writeCtes("transfer_decided")}
      SELECT outcome FROM transfer_decided ORDER BY pos
    `.execute(this.#db);
    return result.rows.map(({ outcome }, i) =>
      SimulatedLedger.resultOf((transfers[i] as LedgerTransfer).reference, outcome),
    );
  }

  /**
   * A transfer made in a caller's transaction (an x402 settlement's, with its payment): the
   * debited wallet stays locked until that transaction ends.
   */
  static async transferWithin(trx: Db, transfer: LedgerTransfer): Promise<LedgerResult> {
    const result = await sql<{ outcome: TransferOutcome }>`
      WITH ${SimulatedLedger.decisionCtes([transfer])},
      ${SimulatedLedger.writeCtes("transfer_decided")}
      SELECT outcome FROM transfer_decided`.execute(trx);
    const outcome = result.rows[0]?.outcome;
    if (!outcome) throw new Error("the ledger transfer was not decided");
    return SimulatedLedger.resultOf(transfer.reference, outcome);
  }

  /** The simulated transaction that used an EIP-3009 authorization (authorizations.ts); null while unused. */
  authorizationTx(
    network: string,
    token: ChainToken,
    authorizer: string,
    nonce: string,
  ): Promise<string | null> {
    return authorizationTx(this.#db, { network, token, authorizer, nonce });
  }

  /** An authorization's use (its transaction, or null) and its authorizer's balance, in one statement. */
  authorizationCheck(
    network: string,
    token: ChainToken,
    authorizer: string,
    nonce: string,
  ): Promise<{ usedBy: string | null; balance: bigint }> {
    return authorizationAndBalance(this.#db, { network, token, authorizer, nonce });
  }

  /** The columns of `transfer_decided` (decisionCtes), for a caller's CTE that passes its rows on. */
  static readonly DECIDED_COLUMNS = [...REQUEST_COLUMNS, "keep", "balance", "outcome"] as const;

  /**
   * The CTEs `transfer_req` (the transfers, `pos` numbering them from 1) and `transfer_decided`
   * (each with the balance of its sending wallet and its `outcome`) of a caller's statement, whose
   * transfers debit each wallet and token at most once (see inDebitRounds). The statement holds
   * the debited wallets' locks until its transaction ends: its transaction should be that one
   * statement. `keep`: what the sending wallet must keep after a transfer, money held for others
   * (an open inbox transfer's, issue 39) that it may not spend; an expression over the transfer's
   * row `r` of `transfer_req` (its network, from_address, token_symbol, pos). None when absent.
   */
  static decisionCtes(transfers: readonly LedgerTransfer[], keep?: RawBuilder<unknown>): RawBuilder<unknown> {
    const rows = transfers.map((t) => ({
      txHash: sandboxTxHash(t.reference),
      network: t.network,
      from: t.from.toLowerCase(),
      to: t.to.toLowerCase(),
      token: t.token,
      amount: t.amount.toString(),
      reference: t.reference,
      failing: t.to.toLowerCase() === FAILURE_ADDRESS,
    }));
    const column = <T>(pick: (r: (typeof rows)[number]) => T) => rows.map(pick);
    return sql`
      transfer_req AS (
        SELECT * FROM unnest(
          ${column((r) => r.txHash)}::text[], ${column((r) => r.network)}::text[],
          ${column((r) => r.from)}::text[], ${column((r) => r.to)}::text[],
          ${column((r) => r.token)}::text[], ${column((r) => r.amount)}::numeric[],
          ${column((r) => r.reference)}::text[], ${column((r) => r.failing)}::boolean[]
        ) WITH ORDINALITY AS r(tx_hash, network, from_address, to_address, token_symbol, amount, memo,
                               failing, pos)
      ),
      transfer_funds AS MATERIALIZED (
        -- Debits of one wallet and token on a network take turns (credits never wait):
        -- ledger_debit_balance (migrations 013, 035, 047) locks the wallet's debits, then reads its
        -- balance with a snapshot that sees every debit committed before. Locks are taken in one
        -- order, so two statements never wait on each other in a circle.
        SELECT w.network, w.from_address AS address, w.token_symbol,
               ledger_debit_balance(w.network, w.from_address, w.token_symbol) AS balance
        FROM (SELECT DISTINCT network, from_address, token_symbol FROM transfer_req WHERE NOT failing
              ORDER BY network, from_address, token_symbol) w
      ),
      transfer_decided AS (
        -- balance: what the transfer may spend, the wallet's less what it must keep.
        SELECT ${columnList(REQUEST_COLUMNS, "r")}, k.keep, coalesce(f.balance, 0) - k.keep AS balance,
               CASE WHEN r.failing THEN 'failure_address'
                    WHEN coalesce(f.balance, 0) - k.keep >= r.amount THEN 'success'
                    ELSE 'insufficient' END AS outcome
        FROM transfer_req r
        CROSS JOIN LATERAL (SELECT (${keep ?? sql`0`})::numeric AS keep) k
        LEFT JOIN transfer_funds f
          ON f.network = r.network AND f.address = r.from_address AND f.token_symbol = r.token_symbol
      )`;
  }

  /**
   * The CTEs that write the transfers of `source` (a CTE with the columns of `transfer_decided`):
   * entries for those that succeed, a transaction record (success or reverted) for each.
   */
  static writeCtes(source: string): RawBuilder<unknown> {
    const from = sql.table(source);
    return sql`
      transfer_entries AS (
        INSERT INTO ledger_entries (network, address, token_symbol, amount, tx_hash)
        SELECT d.network, x.address, d.token_symbol, x.amount, d.tx_hash
        FROM ${from} d
        CROSS JOIN LATERAL (VALUES (d.from_address, -d.amount), (d.to_address, d.amount)) AS x(address, amount)
        WHERE d.outcome = 'success'
      ),
      transfer_recorded AS (
        INSERT INTO ledger_transactions (tx_hash, network, from_address, to_address, token_symbol, amount, status, memo)
        SELECT tx_hash, network, from_address, to_address, token_symbol, amount,
               CASE WHEN outcome = 'success' THEN 'success' ELSE 'reverted' END, memo
        FROM ${from} ORDER BY pos
      )`;
  }

  /** What a transfer's outcome (`transfer_decided.outcome`) means to its caller. */
  static resultOf(reference: string, outcome: TransferOutcome): LedgerResult {
    const txHash = sandboxTxHash(reference);
    if (outcome === "success") return { txHash, status: "success" };
    return {
      txHash,
      status: "reverted",
      error:
        outcome === "failure_address"
          ? "execution reverted (sandbox failure address)"
          : "insufficient balance",
    };
  }
}

/** What serializes a wallet's debits of one token on one network (one debit per round). */
function debitLock(transfer: LedgerTransfer): string {
  return `${transfer.network}:${transfer.from.toLowerCase()}:${transfer.token}`;
}

function asError(err: unknown): Error {
  return err instanceof Error ? err : new Error(String(err));
}
