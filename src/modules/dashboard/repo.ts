import type { Kysely } from "kysely";
import type { DatabaseSchema } from "../../platform/db/schema.ts";

// SQL of dashboard sessions. Rows are keyed by the hash of the cookie's token, never the token.

type Db = Kysely<DatabaseSchema>;

export interface SessionRow {
  id_hash: string;
  workspace_id: string;
  csrf_token: string;
  expires_at: Date;
}

export async function insertSession(db: Db, session: SessionRow): Promise<void> {
  await db.insertInto("dashboard_sessions").values(session).execute();
}

export async function findSession(db: Db, idHash: string): Promise<SessionRow | undefined> {
  return db
    .selectFrom("dashboard_sessions")
    .select(["workspace_id", "csrf_token", "expires_at", "id_hash"])
    .where("id_hash", "=", idHash)
    .executeTakeFirst();
}

export async function deleteSession(db: Db, idHash: string): Promise<void> {
  await db.deleteFrom("dashboard_sessions").where("id_hash", "=", idHash).execute();
}
