import type { Generated } from "kysely";

// The tables of the merchant dashboard's accounts (sessions, login attempts, admin e-mail
// changes), apart from schema.ts to keep each file small.

export interface DashboardSessionsTable {
  id_hash: string;
  workspace_id: string;
  csrf_token: string;
  created_at: Generated<Date>;
  expires_at: Date;
}

/** Admin e-mail changes waiting for the link mailed to the new address (migration 028). */
export interface WorkspaceEmailChangesTable {
  token_hash: string;
  workspace_id: string;
  new_email: string;
  created_at: Date;
  expires_at: Date;
}

export interface DashboardLoginAttemptsTable {
  id: Generated<string>;
  subject_hash: string;
  attempted_at: Generated<Date>;
}
