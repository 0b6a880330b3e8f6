import type { AppContext } from "../../context.ts";
import { hashApiKey, hashPassword, verifyPassword } from "../../platform/secrets/hashing.ts";
import type { WorkspacesService } from "../workspaces/service.ts";
import * as repo from "./repo.ts";

// Dashboard login (D18): e-mail and password against the workspace's scrypt hash. Five failed
// attempts in 15 minutes per e-mail and per client address are answered "too many" without
// checking the password. Every failure looks the same whether or not the e-mail exists, and
// takes as long: an unknown e-mail still costs one scrypt.

export const LOGIN_WINDOW_MS = 15 * 60_000;
export const LOGIN_MAX_FAILURES = 5;

export type LoginOutcome =
  | { status: "ok"; workspaceId: string }
  | { status: "invalid" }
  /** Several workspaces share the e-mail and the password: the form asks which one. */
  | { status: "choose"; workspaces: Array<{ id: string; name: string }> }
  | { status: "limited"; retryAfterSeconds: number };

export interface LoginAttempt {
  email: string;
  password: string;
  /** The workspace chosen when the e-mail names several; empty otherwise. */
  workspaceId: string;
  clientAddress: string;
}

/** Compared against when the e-mail names no workspace, so that the answer takes as long. */
const NO_WORKSPACE_HASH = hashPassword("no workspace has this e-mail address");

export class Logins {
  readonly #ctx: AppContext;
  readonly #workspaces: WorkspacesService;

  constructor(ctx: AppContext, workspaces: WorkspacesService) {
    this.#ctx = ctx;
    this.#workspaces = workspaces;
  }

  async attempt(attempt: LoginAttempt): Promise<LoginOutcome> {
    const db = this.#ctx.db;
    const now = this.#ctx.now();
    const email = attempt.email.trim().toLowerCase();
    const emailSubject = hashApiKey(`email:${email}`);
    const subjects = [emailSubject, hashApiKey(`ip:${attempt.clientAddress}`)];
    const since = new Date(now.getTime() - LOGIN_WINDOW_MS);
    // Written before the password is checked: parallel guesses count each other.
    const ids = await repo.recordAttempt(db, subjects, now);
    const recent = await repo.recentAttempts(db, subjects, since);
    const over = recent.filter((r) => r.count > LOGIN_MAX_FAILURES);
    if (over.length > 0) {
      // Refused unchecked: not a failure of its own, so it does not extend the wait.
      await repo.deleteAttempts(db, ids);
      const frees = Math.min(...over.map((r) => r.oldest.getTime())) + LOGIN_WINDOW_MS;
      return { status: "limited", retryAfterSeconds: Math.max(1, Math.ceil((frees - now.getTime()) / 1000)) };
    }
    await repo.pruneAttempts(db, since);

    const candidates = await this.#workspaces.loginCandidates(email);
    let matching: Array<{ id: string; name: string }> = [];
    if (candidates.length === 0) {
      await verifyPassword(attempt.password, await NO_WORKSPACE_HASH);
    } else {
      const checks = await Promise.all(
        candidates.map((c) => verifyPassword(attempt.password, c.passwordHash)),
      );
      matching = candidates.filter((_, i) => checks[i]).map((c) => ({ id: c.id, name: c.name }));
    }
    if (matching.length === 0) return { status: "invalid" };
    // The password was right: this attempt and the e-mail's earlier failures no longer count.
    await repo.deleteAttempts(db, ids);
    await repo.clearAttempts(db, emailSubject);
    if (matching.length === 1 && matching[0]) return { status: "ok", workspaceId: matching[0].id };
    const chosen = matching.find((w) => w.id === attempt.workspaceId.trim().toLowerCase());
    return chosen ? { status: "ok", workspaceId: chosen.id } : { status: "choose", workspaces: matching };
  }
}
