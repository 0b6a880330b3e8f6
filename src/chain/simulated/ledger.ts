import { type Kysely, sql } from "kysely";
import { keccak256, stringToHex } from "viem";
import type { DatabaseSchema } from "../../platform/db/schema.ts";
import type { ChainToken, Hex } from "../network.ts";

// The sandbox's simulated ledger (D3): balances per address and token in our own database,
// transfers that debit and credit atomically, transaction hashes of the real format derived
// from a caller's unique reference (the same payout always gets the same hash), and a
// documented magic destination that makes a transfer fail like an on-chain revert, so the
// circuit breaker can be exercised without a chain. A product feature, not a test double.

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
      .selectFrom("ledger_balances")
      .select("balance")
      .where("address", "=", address.toLowerCase())
      .where("token_symbol", "=", token)
      .executeTakeFirst();
    return row ? BigInt(row.balance) : 0n;
  }

  /** Adds funds (faucet, sandbox payments received); returns the new balance. */
  async credit(
    address: string,
    token: ChainToken,
    amount: bigint,
    reference: string,
    db: Db = this.#db,
  ): Promise<bigint> {
    const balance = await this.#add(db, address, token, amount);
    await db
      .insertInto("ledger_transactions")
      .values({
        tx_hash: sandboxTxHash(reference),
        from_address: null,
        to_address: address.toLowerCase(),
        token_symbol: token,
        amount: amount.toString(),
        status: "success",
        memo: reference,
      })
      .execute();
    return balance;
  }

  async transfer(transfer: LedgerTransfer): Promise<LedgerResult> {
    const txHash = sandboxTxHash(transfer.reference);
    return this.#db.transaction().execute(async (trx) => {
      const record = (status: "success" | "reverted") =>
        trx
          .insertInto("ledger_transactions")
          .values({
            tx_hash: txHash,
            from_address: transfer.from.toLowerCase(),
            to_address: transfer.to.toLowerCase(),
            token_symbol: transfer.token,
            amount: transfer.amount.toString(),
            status,
            memo: transfer.reference,
          })
          .execute();
      if (transfer.to.toLowerCase() === SANDBOX_FAILURE_ADDRESS.toLowerCase()) {
        await record("reverted");
        return { txHash, status: "reverted", error: "execution reverted (sandbox failure address)" } as const;
      }
      const debited = await trx
        .updateTable("ledger_balances")
        .set({ balance: sql`balance - ${transfer.amount.toString()}::numeric` })
        .where("address", "=", transfer.from.toLowerCase())
        .where("token_symbol", "=", transfer.token)
        .where(sql<boolean>`balance >= ${transfer.amount.toString()}::numeric`)
        .executeTakeFirst();
      if (debited.numUpdatedRows === 0n) {
        await record("reverted");
        return { txHash, status: "reverted", error: "insufficient balance" } as const;
      }
      await this.#add(trx, transfer.to, transfer.token, transfer.amount);
      await record("success");
      return { txHash, status: "success" } as const;
    });
  }

  async #add(db: Db, address: string, token: ChainToken, amount: bigint): Promise<bigint> {
    const row = await db
      .insertInto("ledger_balances")
      .values({ address: address.toLowerCase(), token_symbol: token, balance: amount.toString() })
      .onConflict((oc) =>
        oc
          .columns(["address", "token_symbol"])
          .doUpdateSet({ balance: sql`ledger_balances.balance + excluded.balance` }),
      )
      .returning("balance")
      .executeTakeFirstOrThrow();
    return BigInt(row.balance);
  }
}
