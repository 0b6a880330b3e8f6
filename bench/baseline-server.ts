import { mkdirSync } from "node:fs";
import { PGlite } from "@electric-sql/pglite";
import Fastify from "fastify";
import pg from "pg";

// The benchmark's yardstick: a bare Fastify server whose routes do exactly one statement each —
// one INSERT for the create comparison, one SELECT by primary key for the read comparison — on
// the same database as the service (PostgreSQL through a pg Pool of the service's size, or an
// embedded PGlite folder). No auth, no validation schemas, no rate limit, no logging: what is
// left is the cost of HTTP + JSON + one round trip, which the service's figures are divided by.
//
// Environment: PORT, HOST (default 127.0.0.1), and either DATABASE_URL (PostgreSQL) or
// PGLITE_DIR (embedded); POOL_SIZE (default 10, the service's pool size).

interface Row {
  id: string;
  token_symbol: string;
  amount: string | number;
  created_at: Date | string;
}

interface Store {
  query(text: string, params: unknown[]): Promise<Row[]>;
  close(): Promise<void>;
}

const CREATE_TABLE = `
  CREATE TABLE IF NOT EXISTS bench_baseline (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    token_symbol text NOT NULL,
    amount numeric(78, 0) NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
  )`;
const INSERT = "INSERT INTO bench_baseline (token_symbol, amount) VALUES ($1, $2) RETURNING *";
const SELECT = "SELECT * FROM bench_baseline WHERE id = $1";
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

async function openStore(): Promise<Store> {
  const databaseUrl = process.env.DATABASE_URL;
  if (databaseUrl) {
    const pool = new pg.Pool({ connectionString: databaseUrl, max: Number(process.env.POOL_SIZE ?? 10) });
    pool.on("error", () => {});
    return {
      query: async (text, params) => (await pool.query<Row>(text, params)).rows,
      close: () => pool.end(),
    };
  }
  const dir = process.env.PGLITE_DIR;
  if (!dir) throw new Error("set DATABASE_URL or PGLITE_DIR");
  mkdirSync(dir, { recursive: true });
  const client = new PGlite(dir);
  await client.waitReady;
  return {
    query: async (text, params) => (await client.query<Row>(text, params)).rows,
    close: () => client.close(),
  };
}

const view = (row: Row) => ({
  id: row.id,
  tokenSymbol: row.token_symbol,
  amount: String(row.amount),
  createdAt: new Date(row.created_at).toISOString(),
});

async function main(): Promise<void> {
  const store = await openStore();
  await store.query(CREATE_TABLE, []);
  const [version] = (await store.query("SHOW server_version", [])) as unknown as { server_version: string }[];

  const app = Fastify({ logger: false });
  // The runner reads the server's version from here for bench/RESULTS.md.
  app.get("/health", async () => ({ status: "ok", serverVersion: version?.server_version ?? "unknown" }));
  app.post("/baseline/payments", async (request, reply) => {
    const body = request.body as { tokenSymbol?: unknown; amount?: unknown } | undefined;
    if (typeof body?.tokenSymbol !== "string" || typeof body.amount !== "string") {
      return reply.status(400).send({ error: "tokenSymbol and amount are required" });
    }
    const [row] = await store.query(INSERT, [body.tokenSymbol, body.amount]);
    if (!row) throw new Error("INSERT returned no row");
    return reply.status(201).send({ payment: view(row) });
  });
  app.get("/baseline/payments/:id", async (request, reply) => {
    const { id } = request.params as { id: string };
    const [row] = UUID.test(id) ? await store.query(SELECT, [id]) : [];
    if (!row) return reply.status(404).send({ error: "not found" });
    return { payment: view(row) };
  });

  let stopping = false;
  const stop = async () => {
    if (stopping) return;
    stopping = true;
    try {
      await app.close();
      await store.close();
    } finally {
      process.exit(0);
    }
  };
  process.on("SIGTERM", () => void stop());
  process.on("SIGINT", () => void stop());
  // Started by bench/run.ts with an IPC channel: if the runner dies, do not outlive it.
  process.on("disconnect", () => void stop());

  await app.listen({ port: Number(process.env.PORT ?? 3100), host: process.env.HOST ?? "127.0.0.1" });
}

main().catch((err: unknown) => {
  process.stderr.write(`baseline server failed: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
