import { randomBytes } from "node:crypto";
import { mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import pg from "pg";
import { type DbKind, log, settings, steps } from "./run-settings.ts";
import { startPostgresServer } from "./service-process.ts";

// bench/run.ts's databases: a throw-away PostgreSQL server (scripts/local-postgres.sh) or the
// folder of an embedded PGlite, and the ANALYZE the runner runs between create and GET.

export interface DbSetup {
  kind: DbKind;
  /** DATA_DIR of the service (its master key; the PGlite folder under it). */
  dataDir: string;
  databaseUrl: string | undefined;
  pgliteDir: string | undefined;
  /** The throw-away PostgreSQL server's folder (its postmaster.pid names the processes to count). */
  postgresDir: string | undefined;
  /** The key every start of the service on this server database uses (it is checked at start). */
  masterKey: string;
  /** Stops the PostgreSQL server and removes the folders (also run by the global cleanup). */
  teardown: () => Promise<void>;
}

export async function setUpDatabase(kind: DbKind): Promise<DbSetup> {
  const dataDir = `/tmp/bench-data-${process.pid}-${kind}`;
  rmSync(dataDir, { recursive: true, force: true });
  mkdirSync(dataDir, { recursive: true });
  const removeData = steps.defer(`${kind} data folder`, async () =>
    rmSync(dataDir, { recursive: true, force: true }),
  );
  if (kind === "pglite") {
    // The folder the service opens (src/platform/db/database.ts pgliteDirFor); the baseline opens
    // the same database while the service is not running: PGlite is one process's.
    return {
      kind,
      dataDir,
      databaseUrl: undefined,
      pgliteDir: join(dataDir, "pgdata"),
      postgresDir: undefined,
      masterKey: randomBytes(32).toString("hex"),
      teardown: removeData,
    };
  }
  const server = await startPostgresServer("payments", steps, log);
  return {
    kind,
    dataDir,
    databaseUrl: server.url,
    pgliteDir: undefined,
    postgresDir: server.dir,
    masterKey: randomBytes(32).toString("hex"),
    teardown: async () => {
      await server.stop();
      await removeData();
    },
  };
}

/**
 * The create scenario grows a freshly made table from nothing to thousands of rows, faster than
 * autovacuum (1 min naptime) analyzes it; without statistics the planner answers the GET's
 * `id = … AND workspace_id = … AND environment = …` from payments_list_status, scanning every
 * entry of the workspace, instead of the primary key. The steady state is an analyzed table, so
 * the runner does what autovacuum would, on PostgreSQL (PGlite is owned by the server process).
 */
export async function analyzeThen<T>(setup: DbSetup, next: () => Promise<T>): Promise<T> {
  if (settings.analyze && setup.databaseUrl) {
    const client = new pg.Client({ connectionString: setup.databaseUrl });
    await client.connect();
    try {
      await client.query("ANALYZE");
    } finally {
      await client.end();
    }
  }
  return next();
}
