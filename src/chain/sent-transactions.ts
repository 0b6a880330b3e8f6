import { type RawBuilder, sql } from "kysely";
import type { Db } from "../platform/db/database.ts";
import type { ChainToken, Hex, OnNetwork, ReceiptStatus } from "./network.ts";

// The SQL of chain_transactions: every transaction the service signs from a wallet it holds,
// recorded before it is broadcast. A nonce has one primary transaction and, when the node refused
// that one, a cancelling transaction that replaces it (replaces_tx_hash). Statuses: `signed`
// (may still be mined), `mined` / `failed` (its receipt), `replaced` (never mined: its nonce was
// taken by another mined transaction), `rejected` (refused before migration 016; holds no nonce).

export interface RecordedTransaction {
  txHash: Hex;
  raw: Hex;
  nonce: number;
  token: ChainToken;
  purpose: string;
  /** Set on a cancelling transaction: the one whose nonce it takes. */
  replaces: Hex | null;
  /** The payment it settles: a payment's legs go together (none is paid without the others). */
  paymentId: string | null;
}

export interface NewTransaction extends RecordedTransaction {
  from: Hex;
  to: Hex;
  amount: bigint;
  payoutId: string | null;
  /** The gas limit it is signed with (the most gas it can cost); absent: its kind's default. */
  gasLimit?: bigint;
}

/** The nonce after the last one recorded for `from` (0 when there is none). */
export async function nextRecordedNonce(db: Db, on: OnNetwork, from: Hex): Promise<number> {
  const last = await db
    .selectFrom("chain_transactions")
    .select((eb) => eb.fn.max("nonce").as("nonce"))
    .where("environment", "=", on.environment)
    .where("network", "=", on.id)
    .where("from_address", "=", from)
    .where("status", "<>", "rejected")
    // A cancellation has its primary's nonce; this predicate lets the unique nonce index serve.
    .where("replaces_tx_hash", "is", null)
    .executeTakeFirst();
  return last?.nonce === null || last?.nonce === undefined ? 0 : Number(last.nonce) + 1;
}

export async function recordTransaction(db: Db, on: OnNetwork, tx: NewTransaction): Promise<void> {
  await db
    .insertInto("chain_transactions")
    .values({
      environment: on.environment,
      network: on.id,
      from_address: tx.from,
      nonce: String(tx.nonce),
      purpose: tx.purpose,
      payment_id: tx.paymentId,
      payout_id: tx.payoutId,
      to_address: tx.to,
      token_symbol: tx.token,
      amount: tx.amount.toString(),
      raw_tx: tx.raw,
      tx_hash: tx.txHash,
      replaces_tx_hash: tx.replaces,
      gas_limit: tx.gasLimit?.toString() ?? null,
    })
    .execute();
}

/**
 * Records transactions in ONE statement, only if `claim` (a data-modifying statement returning
 * rows, e.g. "the payout is still processing: claim it") returns a row: the claim and the record
 * commit together or not at all. Returns whether they were recorded.
 */
export async function recordClaimed(
  db: Db,
  on: OnNetwork,
  txs: readonly NewTransaction[],
  claim: RawBuilder<unknown>,
): Promise<boolean> {
  return recordEachClaimed(db, on, [{ txs, claim }]);
}

/**
 * Records the transactions of several sends in ONE statement, each send's only if its own
 * `claim` returns a row. Returns whether every claim held (and so all were recorded); run it in a
 * transaction to roll back the others' claims and records when one did not.
 */
export async function recordEachClaimed(
  db: Db,
  on: OnNetwork,
  sends: readonly { txs: readonly NewTransaction[]; claim: RawBuilder<unknown> }[],
): Promise<boolean> {
  const txs = sends.flatMap((send) => send.txs);
  const sendOf = sends.flatMap((send, i) => send.txs.map(() => i));
  const column = <T>(pick: (tx: NewTransaction) => T) => txs.map(pick);
  const claims = sql.join(
    sends.map((send, i) => sql`${sql.raw(`claim_${i}`)} AS (${send.claim})`),
    sql`, `,
  );
  const held = sql.join(
    sends.map((_, i) => sql`WHEN ${i} THEN EXISTS (SELECT 1 FROM ${sql.raw(`claim_${i}`)})`),
    sql` `,
  );
  const result = await sql<{ tx_hash: string }>`
    WITH ${claims}
    INSERT INTO chain_transactions (environment, network, from_address, nonce, purpose, payment_id, payout_id,
                                    to_address, token_symbol, amount, raw_tx, tx_hash, replaces_tx_hash,
                                    gas_limit)
    SELECT ${on.environment}, ${on.id}, t.from_address, t.nonce, t.purpose, t.payment_id, t.payout_id,
           t.to_address, t.token_symbol, t.amount, t.raw_tx, t.tx_hash, t.replaces_tx_hash, t.gas_limit
    FROM unnest(
      ${column((tx) => tx.from)}::text[], ${column((tx) => String(tx.nonce))}::bigint[],
      ${column((tx) => tx.purpose)}::text[], ${column((tx) => tx.paymentId)}::uuid[],
      ${column((tx) => tx.payoutId)}::uuid[], ${column((tx) => tx.to)}::text[],
      ${column((tx) => tx.token)}::text[], ${column((tx) => tx.amount.toString())}::numeric[],
      ${column((tx) => tx.raw)}::text[], ${column((tx) => tx.txHash)}::text[],
      ${column((tx) => tx.replaces)}::text[], ${column((tx) => tx.gasLimit?.toString() ?? null)}::bigint[],
      ${sendOf}::int[]
    ) AS t(from_address, nonce, purpose, payment_id, payout_id, to_address, token_symbol, amount, raw_tx,
           tx_hash, replaces_tx_hash, gas_limit, send)
    WHERE CASE t.send ${held} ELSE false END
    RETURNING tx_hash`.execute(db);
  return result.rows.length === txs.length && txs.length > 0;
}

/**
 * What is still to be sent of `from`'s nonces from `fromNonce` up to (not including) `toNonce`:
 * per nonce the transaction to broadcast, a signed cancelling one before the transaction it
 * replaces (a transaction that is being cancelled is never broadcast again).
 */
export async function toBroadcast(
  db: Db,
  on: OnNetwork,
  from: Hex,
  fromNonce: number,
  toNonce: number | null,
): Promise<RecordedTransaction[]> {
  const rows = await sql<{
    tx_hash: Hex;
    raw_tx: Hex;
    nonce: string;
    token_symbol: ChainToken;
    purpose: string;
    replaces_tx_hash: Hex | null;
    payment_id: string | null;
  }>`
    SELECT DISTINCT ON (nonce) tx_hash, raw_tx, nonce, token_symbol, purpose, replaces_tx_hash, payment_id
    FROM chain_transactions
    WHERE environment = ${on.environment} AND network = ${on.id} AND from_address = ${from} AND status = 'signed'
      AND nonce >= ${fromNonce} ${toNonce === null ? sql`` : sql`AND nonce < ${toNonce}`}
    ORDER BY nonce, (replaces_tx_hash IS NOT NULL) DESC, created_at DESC
  `.execute(db);
  return rows.rows.map((row) => ({
    txHash: row.tx_hash,
    raw: row.raw_tx,
    nonce: Number(row.nonce),
    token: row.token_symbol,
    purpose: row.purpose,
    replaces: row.replaces_tx_hash,
    paymentId: row.payment_id,
  }));
}

/** Records `signed`, a 0-ETH transaction from `from` to itself, as the cancellation of `tx`. */
export async function recordCancellation(
  db: Db,
  on: OnNetwork,
  from: Hex,
  tx: RecordedTransaction,
  signed: { hash: Hex; raw: Hex; gas: bigint },
): Promise<RecordedTransaction> {
  const cancel = {
    txHash: signed.hash,
    raw: signed.raw,
    nonce: tx.nonce,
    token: "ETH" as const,
    purpose: "cancel",
    replaces: tx.txHash,
    paymentId: null,
  };
  await recordTransaction(db, on, {
    ...cancel,
    from,
    to: from,
    amount: 0n,
    payoutId: null,
    gasLimit: signed.gas,
  });
  return cancel;
}

/** The cancelling transaction recorded for `txHash`, if any. */
export async function cancellationOf(db: Db, txHash: Hex): Promise<RecordedTransaction | undefined> {
  const row = await db
    .selectFrom("chain_transactions")
    .select(["tx_hash", "raw_tx", "nonce", "token_symbol", "purpose", "replaces_tx_hash", "payment_id"])
    .where("replaces_tx_hash", "=", txHash)
    .where("status", "=", "signed")
    .executeTakeFirst();
  if (!row) return undefined;
  return {
    txHash: row.tx_hash as Hex,
    raw: row.raw_tx as Hex,
    nonce: Number(row.nonce),
    token: row.token_symbol as ChainToken,
    purpose: row.purpose,
    replaces: row.replaces_tx_hash as Hex,
    paymentId: row.payment_id,
  };
}

export interface OpenTransaction {
  txHash: Hex;
  from: Hex;
  nonce: number;
  /** A cancellation: the transaction whose nonce it takes. */
  replaces: Hex | null;
  /** Recorded long enough ago that its sender, if alive, has broadcast it. */
  settled: boolean;
}

/** Every signed transaction on the network, by wallet and nonce. */
export async function openTransactions(
  db: Db,
  on: OnNetwork,
  olderThanMs: number,
): Promise<OpenTransaction[]> {
  const rows = await db
    .selectFrom("chain_transactions")
    .select([
      "tx_hash",
      "from_address",
      "nonce",
      "replaces_tx_hash",
      sql<boolean>`created_at < now() - make_interval(secs => ${olderThanMs / 1000})`.as("settled"),
    ])
    .where("environment", "=", on.environment)
    .where("network", "=", on.id)
    .where("status", "=", "signed")
    .orderBy("from_address")
    .orderBy("nonce")
    .execute();
  return rows.map((row) => ({
    txHash: row.tx_hash as Hex,
    from: row.from_address as Hex,
    nonce: Number(row.nonce),
    replaces: row.replaces_tx_hash as Hex | null,
    settled: row.settled,
  }));
}

/** The recipients (lower case) of the network's open transactions of `purpose`. */
export async function openRecipients(db: Db, on: OnNetwork, purpose: string): Promise<Set<string>> {
  const rows = await db
    .selectFrom("chain_transactions")
    .select("to_address")
    .distinct()
    .where("environment", "=", on.environment)
    .where("network", "=", on.id)
    .where("purpose", "=", purpose)
    .where("status", "=", "signed")
    .execute();
  return new Set(rows.map((row) => row.to_address.toLowerCase()));
}

/** Notes why the node refused a transaction that stays open (its nonce is not taken yet). */
export async function noteRefusal(db: Db, txHash: Hex, reason: string): Promise<void> {
  await db
    .updateTable("chain_transactions")
    .set({ error: `refused by the node: ${reason}` })
    .where("tx_hash", "=", txHash)
    .where("status", "=", "signed")
    .execute();
}

/** What became of a recorded transaction: mined either way, or replaced (its nonce taken). */
export interface TransactionOutcome {
  txHash: Hex;
  outcome: Exclude<ReceiptStatus, "not_found"> | "replaced";
  /** Why it did not succeed, appended to the error it was noted with; unused on success. */
  error: string | null;
  at: Date;
}

/**
 * Records a transaction's receipt (or that it can never be mined, after a refusal it was noted
 * with); only a signed one moves.
 */
export async function settleTransaction(
  db: Db,
  txHash: Hex,
  outcome: TransactionOutcome["outcome"],
  error: string | null,
  at: Date,
): Promise<void> {
  await settleTransactions(db, [{ txHash, outcome, error, at }]);
}

/** settleTransaction for many transactions in ONE statement (the receipts of one round of polls). */
export async function settleTransactions(db: Db, outcomes: readonly TransactionOutcome[]): Promise<void> {
  if (outcomes.length === 0) return;
  const column = <T>(pick: (o: TransactionOutcome) => T) => outcomes.map(pick);
  const status = (o: TransactionOutcome) =>
    o.outcome === "success" ? "mined" : o.outcome === "reverted" ? "failed" : "replaced";
  await sql`
    UPDATE chain_transactions AS c
    SET status = o.status,
        error = CASE WHEN o.status = 'mined' THEN NULL ELSE coalesce(c.error || '; ', '') || o.error END,
        mined_at = CASE WHEN o.status = 'replaced' THEN NULL ELSE o.at END
    FROM unnest(
      ${column((o) => o.txHash)}::text[],
      ${column(status)}::text[],
      ${column((o) => o.error)}::text[],
      ${column((o) => o.at)}::timestamptz[]
    ) AS o(tx_hash, status, error, at)
    WHERE c.tx_hash = o.tx_hash AND c.status = 'signed'`.execute(db);
}

/** The unique nonce index refused a record: another transaction holds that nonce already. */
export function isNonceTaken(err: unknown): boolean {
  const e = err as { code?: unknown; constraint?: unknown } | undefined;
  return e?.code === "23505" && e.constraint === "chain_transactions_nonce";
}

// What other modules need to know of this table, asked here (the chain layer owns it): the
// transactions recorded for a payment or payout, as queries or as fragments of their own
// statements where the answer must be read in the same statement (or transaction) as their rows.

/**
 * The transactions recorded for a move, in nonce order: a transfer's (its payout_id) or a
 * payment's settlement's (its payment_id), every leg, their cancellations aside (a cancellation
 * names neither).
 */
export async function transactionsOf(
  db: Db,
  owner: { payoutId: string } | { paymentId: string },
): Promise<Array<{ purpose: string; tx_hash: string; status: string; error: string | null }>> {
  const query = db
    .selectFrom("chain_transactions")
    .select(["purpose", "tx_hash", "status", "error"])
    .orderBy("nonce");
  return (
    "payoutId" in owner
      ? query.where("payout_id", "=", owner.payoutId)
      : query.where("payment_id", "=", owner.paymentId)
  ).execute();
}

/** A condition: a transaction is recorded for the payment whose id is `paymentId` (a column). */
export function recordedForPayment(paymentId: RawBuilder<unknown>): RawBuilder<boolean> {
  return sql<boolean>`EXISTS (SELECT 1 FROM chain_transactions t WHERE t.payment_id = ${paymentId})`;
}

/** A condition: a transaction is recorded for the payout whose id is `payoutId` (a column). */
export function recordedForPayout(payoutId: RawBuilder<unknown>): RawBuilder<boolean> {
  return sql<boolean>`EXISTS (SELECT 1 FROM chain_transactions t WHERE t.payout_id = ${payoutId})`;
}

/** Rows (tx_hash, payout_id) of the transactions among `txHashes` recorded on the network. */
export function recordedAmong(
  on: OnNetwork,
  txHashes: readonly string[],
): RawBuilder<{ tx_hash: string; payout_id: string | null }> {
  return sql`
    SELECT tx_hash, payout_id FROM chain_transactions
    WHERE environment = ${on.environment} AND network = ${on.id} AND tx_hash = ANY(${[...txHashes]}::text[])`;
}

/**
 * Rows (token_symbol, amount, gas_limit) of what `from`'s recorded transactions from `minedNonce`
 * on take out of it: payouts, settlement legs, cancellations (a reverted one took its gas only,
 * not its amount), except the legs of the payments in `exceptPayments`; `gas_limit` null for one
 * recorded before migration 029 (its kind's default).
 */
export function leavingFrom(
  on: OnNetwork,
  from: string,
  minedNonce: number,
  exceptPayments: readonly string[],
): RawBuilder<{ token_symbol: string; amount: string; gas_limit: string | null }> {
  return sql`
    SELECT token_symbol, CASE WHEN status = 'failed' THEN 0 ELSE amount END AS amount, gas_limit
    FROM chain_transactions
    WHERE environment = ${on.environment} AND network = ${on.id} AND from_address = ${from} AND nonce >= ${minedNonce}
      AND status IN ('signed', 'mined', 'failed')
      AND (payment_id IS NULL OR NOT payment_id = ANY(${exceptPayments}::uuid[]))`;
}
