import { sql } from "kysely";
import type { SandboxPair } from "../../domain/swap-math.ts";
import type { Db } from "../../platform/db/database.ts";
import type { Fence } from "../../platform/db/fences.ts";
import type { Scope } from "./venue.ts";

// The SQL of the sandbox's swap pools (sandbox_swap_pools): one row per workspace, simulated
// network and pair, made at its first trade, moved by a compare-and-set in the transaction that records the swap.

export interface Reserves {
  baseReserve: bigint;
  quoteReserve: bigint;
}

/** The pool's reserves now, or undefined before the workspace's first trade of the pair. */
export async function readReserves(
  db: Db,
  scope: Scope,
  network: string,
  pair: SandboxPair,
): Promise<Reserves | undefined> {
  const row = await db
    .selectFrom("sandbox_swap_pools")
    .select(["base_reserve", "quote_reserve"])
    .where("workspace_id", "=", scope.workspaceId)
    .where("network", "=", network)
    .where("pair", "=", pair)
    .executeTakeFirst();
  return row && { baseReserve: BigInt(row.base_reserve), quoteReserve: BigInt(row.quote_reserve) };
}

/** The name of a sandbox trade's fence on its pool among a swap's fences. */
export const POOL_FENCE = "pool";

/**
 * A trade against the pool as fences of the swap's record: the pool made with `initial` reserves
 * if it is not there, then moved by `delta` only if its reserves are still `seen` (refused, fence
 * `pool`, when another trade moved them meanwhile; the update waits on the row's lock for it).
 */
export function tradeFences(
  db: Db,
  scope: Scope,
  network: string,
  pair: SandboxPair,
  trade: { initial: Reserves; seen: Reserves; delta: Reserves },
): Fence[] {
  const made = db
    .insertInto("sandbox_swap_pools")
    .values({
      workspace_id: scope.workspaceId,
      network,
      pair,
      base_reserve: trade.initial.baseReserve.toString(),
      quote_reserve: trade.initial.quoteReserve.toString(),
    })
    .onConflict((oc) => oc.doNothing())
    .compile();
  const moved = db
    .updateTable("sandbox_swap_pools")
    .set({
      base_reserve: sql<string>`base_reserve + ${trade.delta.baseReserve.toString()}::numeric`,
      quote_reserve: sql<string>`quote_reserve + ${trade.delta.quoteReserve.toString()}::numeric`,
    })
    .where("workspace_id", "=", scope.workspaceId)
    .where("network", "=", network)
    .where("pair", "=", pair)
    .where("base_reserve", "=", trade.seen.baseReserve.toString())
    .where("quote_reserve", "=", trade.seen.quoteReserve.toString())
    .returning("pair")
    .compile();
  return [
    { name: "pool-made", statement: made, required: false },
    { name: POOL_FENCE, statement: moved, required: true },
  ];
}
