import type { InjectOptions, LightMyRequestResponse } from "fastify";
import { type App, buildApp } from "../../src/app.ts";
import { type Config, loadConfig } from "../../src/config.ts";
import { type Database, migrate, openDatabase } from "../../src/platform/db/database.ts";
import { SecretBox } from "../../src/platform/secrets/encryption.ts";

// Starts the real app on a real database: in-memory PGlite by default, the PostgreSQL server of
// DATABASE_URL when set (the CI runs the integration suite both ways). Tenants are isolated by
// fresh workspaces, so test files can share one PostgreSQL database.

export const ADMIN_SECRET = "test-admin-secret-0123456789";

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
  options: { database?: Database } = {},
): Promise<TestApp> {
  const config = loadConfig({
    ADMIN_SECRET,
    PUBLIC_BASE_URL: "http://pay.test",
    LOG_LEVEL: "silent",
    ...env,
  });
  // Passing the database of a stopped app simulates a process restart on the same data.
  const database =
    options.database ?? (await openDatabase({ databaseUrl: process.env.DATABASE_URL, poolSize: 20 }));
  await migrate(database.db);
  let fixedNow: Date | undefined;
  const app = await buildApp({
    config,
    db: database.db,
    secrets: new SecretBox(Buffer.alloc(32, 42)),
    now: () => fixedNow ?? new Date(),
    logger: false,
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
      if (!keepDatabase) await database.close();
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
