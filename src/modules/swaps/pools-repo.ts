import type { SandboxPair } from "../../domain/swap-math.ts";
import type { Db } from "../../platform/db/database.ts";
import type { Scope } from "./venue.ts";

// The SQL of the sandbox's swap pools (sandbox_swap_pools): one row per workspace and pair, made
// at its first trade, locked by the swap that trades against it.

export interface Reserves {
  baseReserve: bigint;
  quoteReserve: bigint;
}

/** The pool's reserves now, or undefined before the workspace's first trade of the pair. */
export async function readReserves(db: Db, scope: Scope, pair: SandboxPair): Promise<Reserves | undefined> {
  const row = await db
    .selectFrom("sandbox_swap_pools")
    .select(["base_reserve", "quote_reserve"])
    .where("workspace_id", "=", scope.workspaceId)
    .where("pair", "=", pair)
    .executeTakeFirst();
  return row && { baseReserve: BigInt(row.base_reserve), quoteReserve: BigInt(row.quote_reserve) };
}

/** Makes the pool with `initial` reserves if it is not there, then locks its row; its reserves. */
export async function lockReserves(
  trx: Db,
  scope: Scope,
  pair: SandboxPair,
  initial: Reserves,
): Promise<Reserves> {
  await trx
    .insertInto("sandbox_swap_pools")
    .values({
      workspace_id: scope.workspaceId,
      pair,
      base_reserve: initial.baseReserve.toString(),
      quote_reserve: initial.quoteReserve.toString(),
    })
    .onConflict((oc) => oc.doNothing())
    .execute();
  const row = await trx
    .selectFrom("sandbox_swap_pools")
    .select(["base_reserve", "quote_reserve"])
    .where("workspace_id", "=", scope.workspaceId)
    .where("pair", "=", pair)
    .forUpdate()
    .executeTakeFirstOrThrow();
  return { baseReserve: BigInt(row.base_reserve), quoteReserve: BigInt(row.quote_reserve) };
}

export async function writeReserves(
  trx: Db,
  scope: Scope,
  pair: SandboxPair,
  reserves: Reserves,
): Promise<void> {
  await trx
    .updateTable("sandbox_swap_pools")
    .set({ base_reserve: reserves.baseReserve.toString(), quote_reserve: reserves.quoteReserve.toString() })
    .where("workspace_id", "=", scope.workspaceId)
    .where("pair", "=", pair)
    .execute();
}
