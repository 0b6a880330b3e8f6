import { randomUUID } from "node:crypto";
import { existsSync, mkdtempSync, rmSync, unlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sql } from "kysely";
import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { MasterKeyMismatch, openRuntime, verifyMasterKey } from "./bootstrap.ts";
import { ConfigError, loadConfig } from "./config.ts";
import { type Database, type Db, migrate, openDatabase } from "./platform/db/database.ts";
import { parseMasterKey, SecretBox } from "./platform/secrets/encryption.ts";

// The master key check of openRuntime (what `node src/main.ts` and the CLI start with), on an
// embedded database in a temporary DATA_DIR: a start with another key than the one the
// database's secrets were written with refuses, with a message naming the key to fix.

const KEY_A = "a1".repeat(32);
const KEY_B = Buffer.alloc(32, 0xb2).toString("base64");
const MISMATCH = "MASTER_KEY does not match the key this database's secrets were encrypted with";

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

function dataDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "svc-bootstrap-test-"));
  dirs.push(dir);
  return dir;
}

const configFor = (dir: string, masterKey?: string) =>
  loadConfig({ DATA_DIR: dir, LOG_LEVEL: "silent", ...(masterKey ? { MASTER_KEY: masterKey } : {}) });

async function checkRows(db: Db): Promise<number> {
  const { rows } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM master_key_check`.execute(db);
  return rows[0]?.n ?? -1;
}

/** A workspace with its EOA key sealed by `secrets`, as WorkspacesService.create writes it. */
async function workspaceWithWallet(db: Db, secrets: SecretBox): Promise<void> {
  const ws = await db
    .insertInto("workspaces")
    .values({ name: "Upgraded Co" })
    .returning("id")
    .executeTakeFirstOrThrow();
  await db
    .insertInto("workspace_wallets")
    .values({
      workspace_id: ws.id,
      kind: "eoa",
      address: "0x4444444444444444444444444444444444444444",
      encrypted_private_key: secrets.encrypt(`0x${"12".repeat(32)}`),
    })
    .execute();
}

describe("openRuntime's master key check", () => {
  it("refuses a second start on the same database with another MASTER_KEY, and keeps accepting the first", async () => {
    const dir = dataDir();
    const first = await openRuntime(configFor(dir, KEY_A));
    expect(await checkRows(first.database.db)).toBe(1);
    await first.database.close();

    const refused = openRuntime(configFor(dir, KEY_B));
    await expect(refused).rejects.toThrow(ConfigError);
    await expect(refused).rejects.toThrow(MISMATCH);

    const again = await openRuntime(configFor(dir, KEY_A));
    expect(await checkRows(again.database.db)).toBe(1);
    await again.database.close();
  });

  it("refuses a replaced key file and never writes a new one over a database that has secrets", async () => {
    const dir = dataDir();
    const first = await openRuntime(configFor(dir));
    await first.database.close();
    const keyFile = join(dir, "master.key");
    expect(existsSync(keyFile)).toBe(true);

    // The key file was lost (a new volume, a restore without it): no new key is made up.
    unlinkSync(keyFile);
    await expect(openRuntime(configFor(dir))).rejects.toThrow(/master\.key is missing/);
    expect(existsSync(keyFile)).toBe(false);

    // The right key given as MASTER_KEY is checked like any other.
    await expect(openRuntime(configFor(dir, KEY_B))).rejects.toThrow(MISMATCH);
  });

  it("upgrades a database from before the check: writes it only if this key opens the secrets already there", async () => {
    const dir = dataDir();
    const old = await openRuntime(configFor(dir, KEY_A));
    await workspaceWithWallet(old.database.db, old.secrets);
    // A database migrated before 015 has its secrets but no check row.
    await sql`DELETE FROM master_key_check`.execute(old.database.db);
    await old.database.close();

    await expect(openRuntime(configFor(dir, KEY_B))).rejects.toThrow(MISMATCH);

    const upgraded = await openRuntime(configFor(dir, KEY_A));
    // The refused start wrote nothing; the right key wrote the check.
    expect(await checkRows(upgraded.database.db)).toBe(1);
    await upgraded.database.close();
    await expect(openRuntime(configFor(dir, KEY_B))).rejects.toThrow(MISMATCH);
  });
});

/** Two handles on one new database: PostgreSQL's of DATABASE_URL when set, else in-memory PGlite. */
async function sharedDatabase(): Promise<{ handles: [Database, Database]; drop(): Promise<void> }> {
  const base = process.env.DATABASE_URL;
  if (!base) {
    const only = await openDatabase({});
    await migrate(only.db);
    return { handles: [only, only], drop: () => only.close() };
  }
  const name = `test_${randomUUID().replaceAll("-", "")}`;
  const admin = async (statement: string) => {
    const client = new pg.Client({ connectionString: base });
    await client.connect();
    try {
      await client.query(statement);
    } finally {
      await client.end();
    }
  };
  await admin(`CREATE DATABASE ${name}`);
  const url = new URL(base);
  url.pathname = `/${name}`;
  const a = await openDatabase({ databaseUrl: url.toString() });
  const b = await openDatabase({ databaseUrl: url.toString() });
  await migrate(a.db);
  return {
    handles: [a, b],
    drop: async () => {
      await a.close();
      await b.close();
      await admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    },
  };
}

describe("verifyMasterKey", () => {
  it("lets exactly one of two instances starting together with different keys write the check; the other refuses", async () => {
    const { handles, drop } = await sharedDatabase();
    try {
      const [a, b] = handles;
      const results = await Promise.allSettled([
        verifyMasterKey(a.db, new SecretBox(parseMasterKey(KEY_A)), "MASTER_KEY"),
        verifyMasterKey(b.db, new SecretBox(parseMasterKey(KEY_B)), "MASTER_KEY"),
      ]);
      expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(1);
      const refused = results.flatMap((r) => (r.status === "rejected" ? [r.reason] : []));
      expect(refused).toHaveLength(1);
      expect(refused[0]).toBeInstanceOf(MasterKeyMismatch);
      expect(refused[0]).toHaveProperty("message", MISMATCH);
      expect(await checkRows(a.db)).toBe(1);

      // Whichever won, its key keeps passing and the other keeps refusing.
      const winner = results[0]?.status === "fulfilled" ? KEY_A : KEY_B;
      const loser = winner === KEY_A ? KEY_B : KEY_A;
      await verifyMasterKey(b.db, new SecretBox(parseMasterKey(winner)), "MASTER_KEY");
      await expect(
        verifyMasterKey(a.db, new SecretBox(parseMasterKey(loser)), { file: "/data/master.key" }),
      ).rejects.toThrow(
        "The master key in /data/master.key does not match the key this database's secrets were encrypted with",
      );
    } finally {
      await drop();
    }
  });
});

describe("migrate on a database a newer release migrated (a rolling upgrade)", () => {
  const future = (db: Db, name: string) =>
    sql`INSERT INTO kysely_migration (name, timestamp) VALUES (${name}, ${new Date().toISOString()})`.execute(
      db,
    );

  it("starts without migrating when the newer migrations all come after this release's", async () => {
    const dir = dataDir();
    const first = await openRuntime(configFor(dir, KEY_A));
    expect(first.newerMigrations).toEqual([]);
    await future(first.database.db, "999_from_a_newer_release");
    await first.database.close();
    // Kysely's migrator alone refuses: "previously executed migration … is missing".
    const again = await openRuntime(configFor(dir, KEY_A));
    expect(again.newerMigrations).toEqual(["999_from_a_newer_release"]);
    expect(await checkRows(again.database.db)).toBe(1);
    await again.database.close();
  });

  it("refuses a database whose unknown migrations are not a later release's", async () => {
    const only = await openDatabase({});
    await migrate(only.db);
    await future(only.db, "000_unknown_and_earlier");
    await expect(migrate(only.db)).rejects.toThrow(
      "the database's migrations (000_unknown_and_earlier) are not a later release's on top of this one's",
    );
    await only.close();
  });
});
