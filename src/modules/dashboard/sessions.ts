import { randomBytes } from "node:crypto";
import type { AppContext } from "../../context.ts";
import type { SessionResolution } from "../../platform/http/auth.ts";
import { servedOverHttps } from "../../platform/http/hsts.ts";
import { hashApiKey } from "../../platform/secrets/hashing.ts";
import * as repo from "./repo.ts";

// Server-side dashboard sessions (D12, D18, D21): the cookie holds a random token, the database
// only its hash; every state-changing request must echo the session's CSRF token. A session
// ends after 12 hours without a request or 24 hours after its login, whichever comes first
// (`expires_at` is kept at the earlier of the two); each login opens a new one (never reuses the
// cookie it got).

export const SESSION_COOKIE = "svc_session";
export const SESSION_IDLE_MS = 12 * 3_600_000;
export const SESSION_ABSOLUTE_MS = 24 * 3_600_000;

/**
 * The session cookie's name: `__Host-svc_session` when the public URL is https, so that browsers
 * take it only with `Secure`, `Path=/` and no `Domain` (no sibling subdomain can set or shadow
 * it); plain `svc_session` over http, where browsers refuse the prefix.
 */
export function sessionCookieName(publicBaseUrl: string): string {
  return servedOverHttps(publicBaseUrl) ? `__Host-${SESSION_COOKIE}` : SESSION_COOKIE;
}
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
      created_at: now,
      expires_at: expiresAt,
    });
    return { token, csrfToken, expiresAt };
  }

  /**
   * The session of a cookie's token, its idle expiry moved on (never past 24 hours after its
   * login); null when unknown or ended.
   */
  async resolve(token: string): Promise<SessionResolution> {
    const idHash = hashApiKey(token);
    const row = await repo.findSession(this.#ctx.db, idHash);
    const now = this.#ctx.now().getTime();
    const ends = row ? row.created_at.getTime() + SESSION_ABSOLUTE_MS : 0;
    if (!row || row.expires_at.getTime() <= now || ends <= now) return null;
    const next = Math.min(now + SESSION_IDLE_MS, ends);
    if (next - row.expires_at.getTime() >= EXTEND_AFTER_MS) {
      const extended = await repo.extendSession(this.#ctx.db, idHash, new Date(now), new Date(next));
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
