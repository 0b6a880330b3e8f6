import type { ColumnType, Generated, JSONColumnType } from "kysely";

// The tables of agents and their wallets (modules/agents), apart from schema.ts to keep each file
// small.

type NullableTimestamp = ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;
type Json<T extends object | null> = JSONColumnType<T, string, string>;

export interface AgentsTable {
  id: Generated<string>;
  workspace_id: string;
  environment: string;
  name: string;
  description: string | null;
  metadata: Json<Record<string, unknown>>;
  created_at: Generated<Date>;
  updated_at: NullableTimestamp;
  deleted_at: NullableTimestamp;
}

export interface AgentWalletsTable {
  id: Generated<string>;
  workspace_id: string;
  environment: string;
  owner_id: string;
  type: string;
  address: string;
  encrypted_private_key: string;
  currencies: Json<string[]>;
  created_at: Generated<Date>;
}
