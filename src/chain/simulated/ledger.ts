import { type Kysely, type RawBuilder, sql } from "kysely";
import { keccak256, stringToHex } from "viem";
import type { DatabaseSchema } from "../../platform/db/schema.ts";
import type { ChainToken, Hex } from "../network.ts";

// The sandbox's simulated ledger (D3): append-only entries per address and token in our own
// database (a balance is their sum, so credits never wait on each other), transfers that debit
// and credit atomically, transaction hashes of the real format derived from a caller's unique
// reference (the same payout always gets the same hash), and a documented magic destination
// that makes a transfer fail like an on-chain revert, so the circuit breaker can be exercised
// without a chain. A product feature, not a test double.

/** Payouts to this address fail in the sandbox (an on-chain revert). */
export const SANDBOX_FAILURE_ADDRESS = "0x000000000000000000000000000000000000dEaD";

type Db = Kysely<DatabaseSchema>;

export interface LedgerTransfer {
  from: Hex;
  to: Hex;
  token: ChainToken;
  amount: bigint;
  /** Unique per transfer; the hash is derived from it. */
  reference: string;
}

export interface LedgerCredit {
  address: string;
  token: ChainToken;
  amount: bigint;
  /** Unique per credit; the hash is derived from it. */
  reference: string;
}

export type LedgerResult =
  | { txHash: Hex; status: "success" }
  | { txHash: Hex; status: "reverted"; error: string };

export function sandboxTxHash(reference: string): Hex {
  return keccak256(stringToHex(`sandbox:${reference}`));
}

export class SimulatedLedger {
  readonly #db: Db;

  constructor(db: Db) {
    this.#db = db;
  }

  async balance(address: string, token: ChainToken, db: Db = this.#db): Promise<bigint> {
    const row = await db
      .selectFrom("ledger_entries")
      .select(sql<string>`coalesce(sum(amount), 0)::text`.as("balance"))
      .where("address", "=", address.toLowerCase())
      .where("token_symbol", "=", token)
      .executeTakeFirst();
    return BigInt(row?.balance ?? "0");
  }

  /** A credit as two CTEs (`ledger_tx`, `ledger_entry`) of a caller's larger statement. */
  static creditCtes(
    address: string,
    token: ChainToken,
    amount: bigint,
    reference: string,
  ): RawBuilder<unknown> {
    return SimulatedLedger.creditsCtes([{ address, token, amount, reference }]);
  }

  /** Several credits (at least one) as the two CTEs of `creditCtes`. */
  static creditsCtes(credits: readonly LedgerCredit[]): RawBuilder<unknown> {
    const rows = credits.map((c) => ({
      txHash: sandboxTxHash(c.reference),
      holder: c.address.toLowerCase(),
      token: c.token,
      amount: c.amount.toString(),
      reference: c.reference,
    }));
    return sql`
      ledger_tx AS (
        INSERT INTO ledger_transactions (tx_hash, from_address, to_address, token_symbol, amount, status, memo)
        VALUES ${sql.join(
          rows.map(
            (r) =>
              sql`(${r.txHash}, NULL, ${r.holder}, ${r.token}, ${r.amount}::numeric, 'success', ${r.reference})`,
          ),
        )}
      ),
      ledger_entry AS (
        INSERT INTO ledger_entries (address, token_symbol, amount, tx_hash)
        VALUES ${sql.join(rows.map((r) => sql`(${r.holder}, ${r.token}, ${r.amount}::numeric, ${r.txHash})`))}
      )`;
  }

  /** Adds funds (faucet, sandbox payments received), in one statement; returns the new balance. */
  async credit(
    address: string,
    token: ChainToken,
    amount: bigint,
    reference: string,
    db: Db = this.#db,
  ): Promise<bigint> {
    await sql`WITH ${SimulatedLedger.creditCtes(address, token, amount, reference)} SELECT 1`.execute(db);
    return this.balance(address, token, db);
  }

  async transfer(transfer: LedgerTransfer): Promise<LedgerResult> {
    const txHash = sandboxTxHash(transfer.reference);
    const from = transfer.from.toLowerCase();
    const to = transfer.to.toLowerCase();
    return this.#db.transaction().execute(async (trx) => {
      const record = (status: "success" | "reverted") =>
        trx
          .insertInto("ledger_transactions")
          .values({
            tx_hash: txHash,
            from_address: from,
            to_address: to,
            token_symbol: transfer.token,
            amount: transfer.amount.toString(),
            status,
            memo: transfer.reference,
          })
          .execute();
      if (to === SANDBOX_FAILURE_ADDRESS.toLowerCase()) {
        await record("reverted");
        return { txHash, status: "reverted", error: "execution reverted (sandbox failure address)" } as const;
      }
      // Debits of one wallet and token take turns (credits never wait): check, then spend.
      await sql`SELECT pg_advisory_xact_lock(hashtext(${`ledger:${from}:${transfer.token}`}))`.execute(trx);
      if ((await this.balance(from, transfer.token, trx)) < transfer.amount) {
        await record("reverted");
        return { txHash, status: "reverted", error: "insufficient balance" } as const;
      }
      await trx
        .insertInto("ledger_entries")
        .values([
          {
            address: from,
            token_symbol: transfer.token,
            amount: (-transfer.amount).toString(),
            tx_hash: txHash,
          },
          { address: to, token_symbol: transfer.token, amount: transfer.amount.toString(), tx_hash: txHash },
        ])
        .execute();
      await record("success");
      return { txHash, status: "success" } as const;
    });
  }
}
