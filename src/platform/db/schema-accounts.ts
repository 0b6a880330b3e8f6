import type { Generated } from "kysely";

// The tables of the merchant dashboard's accounts (sessions, login attempts, admin e-mail
// changes), a workspace's checkout logo, and the card provider's events received, apart from
// schema.ts to keep each file small.

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

/** A workspace's logo (migration 043): its type decided by its magic bytes, at most 256 KiB. */
export interface WorkspaceLogosTable {
  workspace_id: string;
  content_type: string;
  bytes: Uint8Array;
  sha256: string;
  updated_at: Date;
}

/** An event the card provider sent, recorded once by its id with what it did (migration 005). */
export interface CardEventsTable {
  event_id: string;
  environment: string;
  event_type: string;
  payment_id: string | null;
  outcome: string;
  received_at: Generated<Date>;
}
