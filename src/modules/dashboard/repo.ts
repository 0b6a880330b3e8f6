import type { Kysely } from "kysely";
import type { DatabaseSchema } from "../../platform/db/schema.ts";

// SQL of dashboard sessions and login attempts. Sessions are keyed by the hash of the cookie's
// token, never the token; attempts by the hash of their e-mail or client address.

type Db = Kysely<DatabaseSchema>;

export interface SessionRow {
  id_hash: string;
  workspace_id: string;
  csrf_token: string;
  /** The login's time: the session ends 24 hours after it whatever its use. */
  created_at: Date;
  expires_at: Date;
}

export async function insertSession(db: Db, session: SessionRow): Promise<void> {
  await db.insertInto("dashboard_sessions").values(session).execute();
}

export async function findSession(db: Db, idHash: string): Promise<SessionRow | undefined> {
  return db
    .selectFrom("dashboard_sessions")
    .select(["workspace_id", "csrf_token", "created_at", "expires_at", "id_hash"])
    .where("id_hash", "=", idHash)
    .executeTakeFirst();
}

/** Moves an unexpired session's expiry on (idle expiry); false when it had already expired. */
export async function extendSession(db: Db, idHash: string, now: Date, expiresAt: Date): Promise<boolean> {
  const result = await db
    .updateTable("dashboard_sessions")
    .set({ expires_at: expiresAt })
    .where("id_hash", "=", idHash)
    .where("expires_at", ">", now)
    .executeTakeFirst();
  return result.numUpdatedRows > 0n;
}

export async function deleteSession(db: Db, idHash: string): Promise<void> {
  await db.deleteFrom("dashboard_sessions").where("id_hash", "=", idHash).execute();
}

/** Expired sessions of a workspace, cleared when it opens a new one. */
export async function deleteExpiredSessions(db: Db, workspaceId: string, now: Date): Promise<void> {
  await db
    .deleteFrom("dashboard_sessions")
    .where("workspace_id", "=", workspaceId)
    .where("expires_at", "<=", now)
    .execute();
}

/** Other sessions of a workspace (a password change signs them out). */
export async function deleteOtherSessions(db: Db, workspaceId: string, keepIdHash: string): Promise<void> {
  await db
    .deleteFrom("dashboard_sessions")
    .where("workspace_id", "=", workspaceId)
    .where("id_hash", "<>", keepIdHash)
    .execute();
}

/** Every session of a workspace (its password was set from the command line). */
export async function deleteWorkspaceSessions(db: Db, workspaceId: string): Promise<void> {
  await db.deleteFrom("dashboard_sessions").where("workspace_id", "=", workspaceId).execute();
}

/** One row per subject of an attempt, and its id (to take back when the attempt succeeds). */
export async function recordAttempt(
  db: Db,
  subjects: string[],
  at: Date,
): Promise<Array<{ id: string; subject: string }>> {
  const rows = await db
    .insertInto("dashboard_login_attempts")
    .values(subjects.map((subject_hash) => ({ subject_hash, attempted_at: at })))
    .returning(["id", "subject_hash"])
    .execute();
  return rows.map((r) => ({ id: r.id, subject: r.subject_hash }));
}

/**
 * Per subject, the attempts since `since` written before the given one (its failures, and the
 * attempts still being checked), and the time of the latest of them.
 */
export async function earlierAttempts(
  db: Db,
  mine: ReadonlyArray<{ id: string; subject: string }>,
  since: Date,
): Promise<Map<string, { count: number; latest: Date }>> {
  if (mine.length === 0) return new Map();
  const rows = await db
    .selectFrom("dashboard_login_attempts")
    .select((eb) => [
      "subject_hash",
      eb.fn.countAll<string>().as("count"),
      eb.fn.max("attempted_at").as("latest"),
    ])
    .where((eb) => eb.or(mine.map((m) => eb.and([eb("subject_hash", "=", m.subject), eb("id", "<", m.id)]))))
    .where("attempted_at", ">", since)
    .groupBy("subject_hash")
    .execute();
  return new Map(rows.map((r) => [r.subject_hash, { count: Number(r.count), latest: new Date(r.latest) }]));
}

/** Every attempt of the subjects (a right password clears them). */
export async function clearSubjects(db: Db, subjects: string[]): Promise<void> {
  if (subjects.length > 0)
    await db.deleteFrom("dashboard_login_attempts").where("subject_hash", "in", subjects).execute();
}

export async function deleteAttempts(db: Db, ids: string[]): Promise<void> {
  if (ids.length > 0) await db.deleteFrom("dashboard_login_attempts").where("id", "in", ids).execute();
}

/** Attempts out of every window: nothing counts them any more. */
export async function pruneAttempts(db: Db, before: Date): Promise<void> {
  await db.deleteFrom("dashboard_login_attempts").where("attempted_at", "<=", before).execute();
}
