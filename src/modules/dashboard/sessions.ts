import { randomBytes } from "node:crypto";
import type { AppContext } from "../../context.ts";
import type { SessionResolution } from "../../platform/http/auth.ts";
import { hashApiKey } from "../../platform/secrets/hashing.ts";
import * as repo from "./repo.ts";

// Server-side dashboard sessions (D12): the cookie holds a random token, the database only its
// hash; every state-changing request must echo the session's CSRF token in X-CSRF-Token.

export const SESSION_COOKIE = "svc_session";
const SESSION_HOURS = 12;

export class SessionsService {
  readonly #ctx: AppContext;

  constructor(ctx: AppContext) {
    this.#ctx = ctx;
  }

  /** Opens a session for a workspace (the login form calls this after checking the password). */
  async open(workspaceId: string): Promise<{ token: string; csrfToken: string; expiresAt: Date }> {
    const token = randomBytes(32).toString("base64url");
    const csrfToken = randomBytes(24).toString("base64url");
    const expiresAt = new Date(this.#ctx.now().getTime() + SESSION_HOURS * 3_600_000);
    await repo.insertSession(this.#ctx.db, {
      id_hash: hashApiKey(token),
      workspace_id: workspaceId,
      csrf_token: csrfToken,
      expires_at: expiresAt,
    });
    return { token, csrfToken, expiresAt };
  }

  async resolve(token: string): Promise<SessionResolution> {
    const row = await repo.findSession(this.#ctx.db, hashApiKey(token));
    if (!row || row.expires_at.getTime() <= this.#ctx.now().getTime()) return null;
    return { workspaceId: row.workspace_id, csrfToken: row.csrf_token, sessionId: row.id_hash };
  }

  /** Logout: the session's token stops working at once. */
  async close(token: string): Promise<void> {
    await repo.deleteSession(this.#ctx.db, hashApiKey(token));
  }
}
