import { afterAll, beforeAll } from "vitest";
import { type Database, openDatabase } from "../../src/platform/db/database.ts";
import { freshDatabaseUrl, startTestApp, type TestApp } from "./app.ts";

// The concurrency suites (refunds, swaps) run each scenario on one app instance, then on two
// instances that share one database: on PostgreSQL (DATABASE_URL) each instance has its own
// connection pool, as two service processes behind a load balancer have; on PGlite they share the
// in-memory database.

/** Where a scenario runs: `a` and `b` are one app, or two apps on one database. */
export interface Instances {
  name: string;
  a: TestApp;
  b: TestApp;
}

/**
 * Registers the file's hooks: before all, one instance then two (in that order in the list it
 * returns, filled in then); after all, every app, pool and database closed in reverse.
 */
export function useInstances(env: Record<string, string>): Instances[] {
  const closers: Array<() => Promise<void>> = [];
  const setups: Instances[] = [];

  async function oneInstance(): Promise<Instances> {
    const a = await startTestApp(env);
    closers.push(() => a.close());
    return { name: "one instance", a, b: a };
  }

  async function twoInstances(): Promise<Instances> {
    const fresh = await freshDatabaseUrl();
    if (!fresh) {
      const a = await startTestApp(env);
      const b = await startTestApp(env, { database: a.database });
      closers.push(async () => {
        await b.close(true);
        await a.close();
      });
      return { name: "two instances sharing PGlite", a, b };
    }
    const pools: Database[] = [];
    for (let i = 0; i < 2; i++) pools.push(await openDatabase({ databaseUrl: fresh.url, poolSize: 20 }));
    const [poolA, poolB] = pools as [Database, Database];
    const a = await startTestApp(env, { database: poolA });
    const b = await startTestApp(env, { database: poolB });
    closers.push(async () => {
      await a.close(true);
      await b.close(true);
      await poolA.close();
      await poolB.close();
      await fresh.drop();
    });
    return { name: "two instances on PostgreSQL, a pool each", a, b };
  }

  beforeAll(async () => {
    setups.push(await oneInstance(), await twoInstances());
  });

  afterAll(async () => {
    for (const close of closers.splice(0).reverse()) await close();
  });

  return setups;
}
