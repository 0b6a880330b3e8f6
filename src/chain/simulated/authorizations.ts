import { type Kysely, sql } from "kysely";
import type { DatabaseSchema } from "../../platform/db/schema.ts";
import type { ChainToken } from "../network.ts";

// The EIP-3009 nonce state of the simulated networks' tokens (sandbox_authorizations, migration
// 040): what `authorizationState` answers on the sandbox's ledger, for x402 (D23), read with the
// authorizer's balance when a transfer by authorization is checked.

type Db = Kysely<DatabaseSchema>;

/** An EIP-3009 authorization as the simulated token records it once used. */
export interface UsedAuthorization {
  network: string;
  token: ChainToken;
  authorizer: string;
  /** bytes32 hex. */
  nonce: string;
  /** The simulated transaction that used it. */
  txHash: string;
}

/**
 * Marks an authorization used, in a caller's transaction (with the transfer it makes): false when
 * it was used before (the transfer must not be made).
 */
export async function useAuthorization(trx: Db, used: UsedAuthorization): Promise<boolean> {
  const row = await trx
    .insertInto("sandbox_authorizations")
    .values({
      network: used.network,
      token_symbol: used.token,
      authorizer: used.authorizer.toLowerCase(),
      nonce: used.nonce.toLowerCase(),
      tx_hash: used.txHash,
    })
    .onConflict((oc) => oc.doNothing())
    .returning("tx_hash")
    .executeTakeFirst();
  return row !== undefined;
}

/**
 * What a transfer by authorization checks before it moves anything, in one statement: the
 * transaction that used the authorization (null while unused) and the authorizer's balance.
 */
export async function authorizationAndBalance(
  db: Db,
  used: Omit<UsedAuthorization, "txHash">,
): Promise<{ usedBy: string | null; balance: bigint }> {
  const authorizer = used.authorizer.toLowerCase();
  const row = await db
    .selectNoFrom((eb) => [
      eb
        .selectFrom("sandbox_authorizations")
        .select("tx_hash")
        .where("network", "=", used.network)
        .where("token_symbol", "=", used.token)
        .where("authorizer", "=", authorizer)
        .where("nonce", "=", used.nonce.toLowerCase())
        .as("used_by"),
      eb
        .selectFrom("ledger_balance_parts")
        .select(sql<string>`coalesce(sum(amount), 0)::text`.as("balance"))
        .where("network", "=", used.network)
        .where("address", "=", authorizer)
        .where("token_symbol", "=", used.token)
        .as("balance"),
    ])
    .executeTakeFirstOrThrow();
  return { usedBy: row.used_by ?? null, balance: BigInt(row.balance ?? "0") };
}

/** The simulated transaction that used an authorization; null while it is unused. */
export async function authorizationTx(
  db: Db,
  used: Omit<UsedAuthorization, "txHash">,
): Promise<string | null> {
  const row = await db
    .selectFrom("sandbox_authorizations")
    .select("tx_hash")
    .where("network", "=", used.network)
    .where("token_symbol", "=", used.token)
    .where("authorizer", "=", used.authorizer.toLowerCase())
    .where("nonce", "=", used.nonce.toLowerCase())
    .executeTakeFirst();
  return row?.tx_hash ?? null;
}
