import { randomBytes } from "node:crypto";
import type { AppContext } from "../../context.ts";
import type { SessionResolution } from "../../platform/http/auth.ts";
import { hashApiKey } from "../../platform/secrets/hashing.ts";
import * as repo from "./repo.ts";

// Server-side dashboard sessions (D12, D18): the cookie holds a random token, the database only
// its hash; every state-changing request must echo the session's CSRF token. A session expires
// after 12 hours without a request; each login opens a new one (never reuses the cookie it got).

export const SESSION_COOKIE = "svc_session";
export const SESSION_IDLE_MS = 12 * 3_600_000;
/** Expiry is moved on at most once a minute: a page view is not a write each time. */
const EXTEND_AFTER_MS = 60_000;

export class SessionsService {
  readonly #ctx: AppContext;

  constructor(ctx: AppContext) {
    this.#ctx = ctx;
  }

  /** Opens a session for a workspace (the login form calls this after checking the password). */
  async open(workspaceId: string): Promise<{ token: string; csrfToken: string; expiresAt: Date }> {
    const token = randomBytes(32).toString("base64url");
    const csrfToken = randomBytes(24).toString("base64url");
    const now = this.#ctx.now();
    const expiresAt = new Date(now.getTime() + SESSION_IDLE_MS);
    await repo.deleteExpiredSessions(this.#ctx.db, workspaceId, now);
    await repo.insertSession(this.#ctx.db, {
      id_hash: hashApiKey(token),
      workspace_id: workspaceId,
      csrf_token: csrfToken,
      expires_at: expiresAt,
    });
    return { token, csrfToken, expiresAt };
  }

  /** The session of a cookie's token, its idle expiry moved on; null when unknown or expired. */
  async resolve(token: string): Promise<SessionResolution> {
    const idHash = hashApiKey(token);
    const row = await repo.findSession(this.#ctx.db, idHash);
    const now = this.#ctx.now().getTime();
    if (!row || row.expires_at.getTime() <= now) return null;
    if (row.expires_at.getTime() - now < SESSION_IDLE_MS - EXTEND_AFTER_MS) {
      const extended = await repo.extendSession(
        this.#ctx.db,
        idHash,
        new Date(now),
        new Date(now + SESSION_IDLE_MS),
      );
      if (!extended) return null;
    }
    return { workspaceId: row.workspace_id, csrfToken: row.csrf_token, sessionId: row.id_hash };
  }

  /** Logout: the session's token stops working at once. */
  async close(token: string): Promise<void> {
    await repo.deleteSession(this.#ctx.db, hashApiKey(token));
  }

  /** A password set from the command line (recovery): every session of the workspace ends. */
  async closeAll(workspaceId: string): Promise<void> {
    await repo.deleteWorkspaceSessions(this.#ctx.db, workspaceId);
  }

  /** After a password change: every other session of the workspace ends. */
  async closeOthers(workspaceId: string, sessionId: string): Promise<void> {
    await repo.deleteOtherSessions(this.#ctx.db, workspaceId, sessionId);
  }
}
