import { type Kysely, sql } from "kysely";

// Agents and their wallets (parts 2, 4.16, 4.17; D8). Lists are per workspace and environment,
// newest first; search is a case-insensitive substring over name and description, served by
// trigram indexes so it stays an index scan at 100,000 agents.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`CREATE EXTENSION IF NOT EXISTS pg_trgm`.execute(db);
  await sql`
    CREATE TABLE agents (
      id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
      workspace_id uuid NOT NULL REFERENCES workspaces(id),
      environment text NOT NULL CHECK (environment IN ('sandbox', 'live')),
      name text NOT NULL,
      description text,
      metadata jsonb NOT NULL DEFAULT '{}'::jsonb,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz,
      deleted_at timestamptz
    )`.execute(db);
  await sql`
    CREATE INDEX agents_list ON agents (workspace_id, environment, created_at DESC, id DESC) WHERE deleted_at IS NULL
  `.execute(db);
  await sql`CREATE INDEX agents_search ON agents USING gin ((lower(name || ' ' || coalesce(description, ''))) gin_trgm_ops)`.execute(
    db,
  );

  await sql`
    CREATE TABLE agent_wallets (
      id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
      workspace_id uuid NOT NULL REFERENCES workspaces(id),
      environment text NOT NULL CHECK (environment IN ('sandbox', 'live')),
      owner_id text NOT NULL,
      type text NOT NULL CHECK (type IN ('agent', 'user')),
      address text NOT NULL UNIQUE,
      encrypted_private_key text NOT NULL,
      currencies jsonb NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now()
    )`.execute(db);
  await sql`CREATE INDEX agent_wallets_list ON agent_wallets (workspace_id, environment, created_at DESC, id DESC)`.execute(
    db,
  );
  await sql`CREATE INDEX agent_wallets_owner ON agent_wallets (workspace_id, environment, owner_id)`.execute(
    db,
  );
  await sql`CREATE INDEX agent_wallets_currency ON agent_wallets USING gin (currencies)`.execute(db);
  await sql`CREATE INDEX agent_wallets_address ON agent_wallets (lower(address))`.execute(db);
}

export async function down(): Promise<void> {
  throw new Error("the agents migration is not reversible");
}
