import ipaddr from "ipaddr.js";
import type { AppContext } from "../../context.ts";
import { hashApiKey, hashPassword, verifyPassword } from "../../platform/secrets/hashing.ts";
import type { WorkspacesService } from "../workspaces/service.ts";
import * as repo from "./repo.ts";

// Dashboard passwords (D18): e-mail and password against the workspace's scrypt hash. Five failed
// attempts in 15 minutes per e-mail and per client address are answered "too many" without
// checking the password; the current password asked by the password form is limited the same
// way, per workspace. Every failure looks the same whether or not the e-mail exists, and takes
// as long: an unknown e-mail still costs one scrypt.

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

/**
 * The bucket of a client address: an IPv4 address itself, an IPv6 address's /64 (one host is
 * usually given a whole /64, so single addresses would be free to rotate).
 */
export function addressBucket(address: string): string {
  if (!ipaddr.isValid(address)) return address;
  const parsed = ipaddr.process(address);
  if (parsed.kind() === "ipv4") return parsed.toString();
  const parts = parsed.toNormalizedString().split(":").slice(0, 4);
  return `${parts.join(":")}::/64`;
}

export class Logins {
  readonly #ctx: AppContext;
  readonly #workspaces: WorkspacesService;

  constructor(ctx: AppContext, workspaces: WorkspacesService) {
    this.#ctx = ctx;
    this.#workspaces = workspaces;
  }

  async attempt(attempt: LoginAttempt): Promise<LoginOutcome> {
    const email = attempt.email.trim().toLowerCase();
    const subjects = [`email:${email}`, `ip:${addressBucket(attempt.clientAddress)}`];
    return this.#limited(subjects, async () => {
      const candidates = await this.#workspaces.loginCandidates(email);
      if (candidates.length === 0) {
        await verifyPassword(attempt.password, await NO_WORKSPACE_HASH);
        return { status: "invalid" };
      }
      const checks = await Promise.all(
        candidates.map((c) => verifyPassword(attempt.password, c.passwordHash)),
      );
      const matching = candidates.filter((_, i) => checks[i]).map((c) => ({ id: c.id, name: c.name }));
      if (matching.length === 0) return { status: "invalid" };
      if (matching.length === 1 && matching[0]) return { status: "ok", workspaceId: matching[0].id };
      const chosen = matching.find((w) => w.id === attempt.workspaceId.trim().toLowerCase());
      return chosen ? { status: "ok", workspaceId: chosen.id } : { status: "choose", workspaces: matching };
    });
  }

  /**
   * The workspace's current password, asked before it is changed: limited per workspace and per
   * client address like a login, so a stolen session cannot guess it at scrypt's pace.
   */
  async checkPassword(
    workspaceId: string,
    password: string,
    clientAddress: string,
  ): Promise<"ok" | "invalid" | { retryAfterSeconds: number }> {
    const outcome = await this.#limited(
      [`workspace:${workspaceId}`, `ip:${addressBucket(clientAddress)}`],
      async (): Promise<LoginOutcome> => {
        const stored = await this.#workspaces.passwordHash(workspaceId);
        const right = stored !== null && (await verifyPassword(password, stored));
        return right ? { status: "ok", workspaceId } : { status: "invalid" };
      },
    );
    if (outcome.status === "limited") return { retryAfterSeconds: outcome.retryAfterSeconds };
    return outcome.status === "ok" ? "ok" : "invalid";
  }

  /**
   * Runs `check` unless a subject is over its limit. The attempt is written before the check, so
   * parallel guesses count each other; it is taken back when the check succeeds (the failures
   * before it still count until they age out) or when the limit refused it unchecked (so that a
   * guesser's refused attempts do not extend the wait).
   */
  async #limited(names: string[], check: () => Promise<LoginOutcome>): Promise<LoginOutcome> {
    const db = this.#ctx.db;
    const now = this.#ctx.now();
    const subjects = names.map((name) => hashApiKey(name));
    const since = new Date(now.getTime() - LOGIN_WINDOW_MS);
    const ids = await repo.recordAttempt(db, subjects, now);
    const over = (await repo.recentAttempts(db, subjects, since)).filter((r) => r.count > LOGIN_MAX_FAILURES);
    if (over.length > 0) {
      await repo.deleteAttempts(db, ids);
      const frees = Math.min(...over.map((r) => r.oldest.getTime())) + LOGIN_WINDOW_MS;
      return { status: "limited", retryAfterSeconds: Math.max(1, Math.ceil((frees - now.getTime()) / 1000)) };
    }
    await repo.pruneAttempts(db, since);
    const outcome = await check();
    if (outcome.status !== "invalid") await repo.deleteAttempts(db, ids);
    return outcome;
  }
}
