import type { Db } from "../../src/platform/db/database.ts";

// Bounded polls for suites that wait on the service's background work (no sleeps in tests).

/** Polls every 100 ms until `read` gives what `done` accepts; throws, naming `what`, after `timeoutMs`. */
export async function until<T>(
  what: string,
  read: () => Promise<T>,
  done: (value: T) => boolean,
  timeoutMs = 60_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (Date.now() > deadline)
      throw new Error(`${what}: still ${JSON.stringify(value)} after ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** Until the live chain watcher has scanned block `block` (its cursor is there or beyond). */
export function watcherPassed(db: Db, block: bigint): Promise<bigint> {
  return until(
    `the watcher at block ${block}`,
    async () => {
      const row = await db
        .selectFrom("chain_cursors")
        .select("block_number")
        .where("environment", "=", "live")
        .executeTakeFirst();
      return row ? BigInt(String(row.block_number)) : -1n;
    },
    (at) => at >= block,
  );
}
