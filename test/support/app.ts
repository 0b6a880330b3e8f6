import { randomUUID } from "node:crypto";
import type { Writable } from "node:stream";
import type { InjectOptions, LightMyRequestResponse } from "fastify";
import pg from "pg";
import { type App, buildApp } from "../../src/app.ts";
import { type Config, loadConfig } from "../../src/config.ts";
import { type Database, migrate, openDatabase } from "../../src/platform/db/database.ts";
import { loggerOptions } from "../../src/platform/log/scrub.ts";
import { SecretBox } from "../../src/platform/secrets/encryption.ts";
import type { ScryptCost } from "../../src/platform/secrets/hashing.ts";

// Starts the real app on a real database: in-memory PGlite by default, the PostgreSQL server of
// DATABASE_URL when set (the CI runs the integration suite both ways). Tenants are isolated by
// fresh workspaces, so test files can share one PostgreSQL database.

export const ADMIN_SECRET = "test-admin-secret-0123456789";

/**
 * The suites' scrypt cost for admin passwords: the lowest a stored hash may name (about 1 ms
 * instead of 0.3–0.7 s); the same code path. password-hash.test.ts checks the service's own.
 */
const SUITE_PASSWORD_COST: ScryptCost = { N: 2 ** 10, r: 8, p: 1 };

export interface TestApp {
  app: App;
  database: Database;
  config: Config;
  /** Moves the injectable clock; `undefined` restores real time. */
  setNow(date: Date | undefined): void;
  request(options: InjectOptions): Promise<LightMyRequestResponse>;
  /** `keepDatabase` leaves the database open for a restarted app (see `options.database`). */
  close(keepDatabase?: boolean): Promise<void>;
}

export async function startTestApp(
  env: Record<string, string> = {},
  options: {
    database?: Database;
    /** Receives the app's log lines (JSON, the service's logger options, LOG_LEVEL info unless `env` says); silent without it. */
    logs?: Writable;
    /** scrypt's cost for admin passwords; SUITE_PASSWORD_COST unless given. */
    passwordCost?: ScryptCost;
  } = {},
): Promise<TestApp> {
  const config = loadConfig({
    ADMIN_SECRET,
    PUBLIC_BASE_URL: "http://pay.test",
    LOG_LEVEL: options.logs ? "info" : "silent",
    // The suites' webhook receivers listen on 127.0.0.1, a blocked destination otherwise (D21);
    // tests of the rule itself pass "false".
    WEBHOOK_ALLOW_PRIVATE: "true",
    ...env,
  });
  // Passing the database of a stopped app simulates a process restart on the same data.
  const owned = options.database ? undefined : await freshDatabaseUrl();
  const database =
    options.database ??
    (await openDatabase({ databaseUrl: owned?.url ?? process.env.DATABASE_URL, poolSize: 20 }));
  await migrate(database.db);
  let fixedNow: Date | undefined;
  const app = await buildApp({
    config,
    db: database.db,
    secrets: new SecretBox(Buffer.alloc(32, 42)),
    now: () => fixedNow ?? new Date(),
    logger: options.logs ? { ...loggerOptions(config), stream: options.logs } : false,
    passwordCost: options.passwordCost ?? SUITE_PASSWORD_COST,
  });
  await app.http.ready();
  return {
    app,
    database,
    config,
    setNow: (date) => {
      fixedNow = date;
    },
    request: (options) => app.http.inject(options),
    close: async (keepDatabase = false) => {
      await app.http.close();
      if (keepDatabase) return;
      await database.close();
      await owned?.drop();
    },
  };
}

/**
 * On PostgreSQL every app gets a database of its own, as PGlite's in-memory one is: background
 * jobs keep per-environment state (chain cursor, job leases) that test files running in parallel
 * against different devnets must not share.
 */
export async function freshDatabaseUrl(): Promise<{ url: string; drop(): Promise<void> } | undefined> {
  const base = process.env.DATABASE_URL;
  if (!base) return undefined;
  const name = `test_${randomUUID().replaceAll("-", "")}`;
  const admin = new pg.Client({ connectionString: base });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(base);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: async () => {
      const client = new pg.Client({ connectionString: base });
      await client.connect();
      try {
        await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await client.end();
      }
    },
  };
}

export interface CreatedWorkspace {
  id: string;
  testKey: string;
  liveKey: string;
  eoaAddress: string;
  body: Record<string, unknown>;
}

export async function createWorkspace(
  t: TestApp,
  body: Record<string, unknown> = {},
): Promise<CreatedWorkspace> {
  const res = await t.request({
    method: "POST",
    url: "/api/v1/workspaces",
    headers: { authorization: `Bearer ${ADMIN_SECRET}` },
    payload: {
      name: "Test workspace",
      settlementAddress: "0x1111111111111111111111111111111111111111",
      ...body,
    },
  });
  if (res.statusCode !== 201) throw new Error(`workspace creation failed: ${res.statusCode} ${res.body}`);
  const json = res.json();
  return {
    id: json.workspace.id,
    testKey: json.apiKeys.test.key,
    liveKey: json.apiKeys.live.key,
    eoaAddress: json.workspace.eoa.address,
    body: json,
  };
}

export const bearer = (key: string) => ({ authorization: `Bearer ${key}` });

/**
 * A sandbox crypto payment of USDC by `key`, its id. The sandbox forwards at once; `pending: true`
 * sets the row back to pending, as a payer first sees a payment on its page.
 */
export async function sandboxPayment(
  t: TestApp,
  key: string,
  options: { amount?: string; pending?: boolean } = {},
): Promise<string> {
  const res = await t.request({
    method: "POST",
    url: "/api/v1/payments",
    headers: bearer(key),
    payload: { amount: options.amount ?? "1.00", tokenSymbol: "USDC", paymentMethod: "crypto" },
  });
  if (res.statusCode !== 201) throw new Error(`payment not created: ${res.statusCode} ${res.body}`);
  const id: string = res.json().payment.id;
  if (options.pending)
    await t.database.db.updateTable("payments").set({ status: "pending" }).where("id", "=", id).execute();
  return id;
}
