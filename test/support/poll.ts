import type { Db } from "../../src/platform/db/database.ts";

// Bounded polls for suites that wait on the service's background work (no sleeps in tests).

/** Polls every `everyMs` until `read` gives what `done` accepts; throws, naming `what`, after `timeoutMs`. */
export async function until<T>(
  what: string,
  read: () => Promise<T>,
  done: (value: T) => boolean,
  timeoutMs = 60_000,
  everyMs = 100,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (Date.now() > deadline)
      throw new Error(`${what}: still ${JSON.stringify(value)} after ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}

/**
 * Polls `probe` until it gives a value other than undefined, and gives that value; the suites
 * whose probes answer "not yet" with undefined (and may answer false or 0 as a result) use this.
 */
export async function untilDefined<T>(
  what: string,
  probe: () => Promise<T | undefined>,
  timeoutMs = 60_000,
  everyMs = 25,
): Promise<T> {
  const value = await until(what, probe, (v) => v !== undefined, timeoutMs, everyMs);
  if (value === undefined) throw new Error(`${what}: no value`);
  return value;
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

/**
 * Lets `ms` of wall time pass. Only for a wait that proves something did NOT happen (a second
 * send, a crash): there is no event to poll for, so the wait is fixed, short and named as such.
 */
export function elapse(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * Until `count` more blocks than now have been mined, as `blockNumber` reads the chain's height:
 * a bounded poll on the chain's progress, for a suite proving that nothing lands in those blocks.
 */
export async function blocksPass(
  blockNumber: () => Promise<bigint>,
  count: number,
  timeoutMs = 60_000,
): Promise<bigint> {
  const from = await blockNumber();
  return until(
    `${count} blocks after block ${from}`,
    blockNumber,
    (at) => at >= from + BigInt(count),
    timeoutMs,
  );
}
