import { type Kysely, type RawBuilder, sql } from "kysely";
import type { Environment } from "../../config.ts";
import type { DatabaseSchema } from "./schema.ts";

// The wallet's stats count payments and payouts the same way; each module's repo names its own
// table and amount column, and this writes the one query.

/** Count and volume (smallest units, as text) of one network, status and token. */
export interface StatusTotal {
  /** The network (D22); null for what is on none (card payments). */
  network: string | null;
  status: string;
  token_symbol: string;
  count: string | number;
  volume: string;
}

/** Totals of a workspace's rows in one environment per status, token and network, in that order. */
export async function totalsByStatus(
  db: Kysely<DatabaseSchema>,
  of: { table: "payments"; amount: "gross_amount" } | { table: "payouts"; amount: "amount" },
  scope: { workspaceId: string; environment: Environment },
  /** Which of the table's rows count (the caller's own condition); default all. */
  only: RawBuilder<boolean> = sql<boolean>`true`,
): Promise<StatusTotal[]> {
  const result = await sql<StatusTotal>`
    SELECT network, status, token_symbol, count(*) AS count,
           coalesce(sum(${sql.ref(of.amount)}), 0)::text AS volume
    FROM ${sql.table(of.table)}
    WHERE workspace_id = ${scope.workspaceId} AND environment = ${scope.environment} AND ${only}
    GROUP BY status, token_symbol, network ORDER BY status, token_symbol, network
  `.execute(db);
  return result.rows;
}

/** `rows` summed over their networks: one per status and token, in that order. */
export function acrossNetworks(rows: readonly StatusTotal[]): Omit<StatusTotal, "network">[] {
  const summed = new Map<string, { status: string; token_symbol: string; count: bigint; volume: bigint }>();
  for (const row of rows) {
    const key = `${row.status}|${row.token_symbol}`;
    const total = summed.get(key) ?? {
      status: row.status,
      token_symbol: row.token_symbol,
      count: 0n,
      volume: 0n,
    };
    total.count += BigInt(row.count);
    total.volume += BigInt(row.volume);
    summed.set(key, total);
  }
  return [...summed.values()].map((t) => ({
    status: t.status,
    token_symbol: t.token_symbol,
    count: t.count.toString(),
    volume: t.volume.toString(),
  }));
}
