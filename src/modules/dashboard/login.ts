import ipaddr from "ipaddr.js";
import type { AppContext } from "../../context.ts";
import { hashApiKey, hashPassword, verifyPassword } from "../../platform/secrets/hashing.ts";
import type { WorkspacesService } from "../workspaces/service.ts";
import * as repo from "./repo.ts";

// Dashboard passwords (D18, D21): e-mail and password against the workspace's scrypt hash.
// Failures are counted per (e-mail, client address) and per client address, never per e-mail
// alone: guesses from elsewhere cannot lock the owner out, and the right password from an
// address that has not failed signs in. Each subject has a number of free failures; beyond them
// an attempt must wait after the subject's latest failure, twice as long at each further
// failure (30 s, 1 min, 2 min … at most 15 min), and is answered "too many" without checking the
// password until then. Failures count for 24 hours. A right password clears its (e-mail,
// address) failures, never its address's: e-mails are not unique, so a right password of
// another workspace with the same e-mail must not free the guessing at this one. The current
// password asked again before a sensitive change (step-up) is limited the same way, per session
// and per address. Every failure looks the same whether or not the e-mail exists, and takes as
// long: an unknown e-mail still costs one scrypt.

export const LOGIN_LIMITS = {
  /** How long a failure counts. */
  windowMs: 24 * 3_600_000,
  /** The wait after the first failure beyond the free ones; each further one doubles it. */
  firstDelayMs: 30_000,
  maxDelayMs: 15 * 60_000,
  /** Free failures per (e-mail, client address), and per session for the step-up. */
  freePerPair: 5,
  /** Free failures per client address (several people may share one: an office, a NAT). */
  freePerAddress: 20,
} as const;

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

/** What failures are counted against: `free` failures before any wait. */
interface Subject {
  name: string;
  free: number;
  /** A right password clears this subject's failures. */
  clearedBySuccess: boolean;
}

/** The wait after a subject's latest failure once it has `failures` of them; 0 while free. */
export function delayAfter(failures: number, free: number): number {
  if (failures < free) return 0;
  return Math.min(LOGIN_LIMITS.firstDelayMs * 2 ** (failures - free), LOGIN_LIMITS.maxDelayMs);
}

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

const addressSubject = (clientAddress: string): Subject => ({
  name: `ip:${addressBucket(clientAddress)}`,
  free: LOGIN_LIMITS.freePerAddress,
  clearedBySuccess: false,
});

export class Logins {
  readonly #ctx: AppContext;
  readonly #workspaces: WorkspacesService;
  /** Compared against when the e-mail names no workspace, so that the answer takes as long. */
  #noWorkspaceHash: Promise<string> | undefined;

  constructor(ctx: AppContext, workspaces: WorkspacesService) {
    this.#ctx = ctx;
    this.#workspaces = workspaces;
  }

  #dummyHash(): Promise<string> {
    this.#noWorkspaceHash ??= hashPassword("no workspace has this e-mail address", this.#ctx.passwordCost);
    return this.#noWorkspaceHash;
  }

  async attempt(attempt: LoginAttempt): Promise<LoginOutcome> {
    const email = attempt.email.trim().toLowerCase();
    const subjects: Subject[] = [
      {
        name: `email-ip:${email}\n${addressBucket(attempt.clientAddress)}`,
        free: LOGIN_LIMITS.freePerPair,
        clearedBySuccess: true,
      },
      addressSubject(attempt.clientAddress),
    ];
    return this.#limited(subjects, async () => {
      const candidates = await this.#workspaces.loginCandidates(email);
      if (candidates.length === 0) {
        await verifyPassword(attempt.password, await this.#dummyHash());
        return { status: "invalid" };
      }
      const checks = await Promise.all(
        candidates.map((c) => verifyPassword(attempt.password, c.passwordHash)),
      );
      const matching = candidates.filter((_, i) => checks[i]);
      const chosen =
        matching.length === 1
          ? matching[0]
          : matching.find((w) => w.id === attempt.workspaceId.trim().toLowerCase());
      if (matching.length === 0) return { status: "invalid" };
      if (!chosen) return { status: "choose", workspaces: matching.map((c) => ({ id: c.id, name: c.name })) };
      // A hash made at a lower cost than today's is replaced now that the password is known.
      await this.#workspaces.upgradePasswordHash(chosen.id, chosen.passwordHash, attempt.password);
      return { status: "ok", workspaceId: chosen.id };
    });
  }

  /**
   * The workspace's current password, asked again before a sensitive change (step-up) or a
   * password change: limited per session and per client address like a login, so that a stolen
   * session cannot guess it at scrypt's pace.
   */
  async checkPassword(check: {
    workspaceId: string;
    sessionId: string;
    password: string;
    clientAddress: string;
  }): Promise<"ok" | "invalid" | { retryAfterSeconds: number }> {
    const subjects: Subject[] = [
      { name: `session:${check.sessionId}`, free: LOGIN_LIMITS.freePerPair, clearedBySuccess: true },
      addressSubject(check.clientAddress),
    ];
    const outcome = await this.#limited(subjects, async (): Promise<LoginOutcome> => {
      const stored = await this.#workspaces.passwordHash(check.workspaceId);
      const right = stored !== null && (await verifyPassword(check.password, stored));
      return right ? { status: "ok", workspaceId: check.workspaceId } : { status: "invalid" };
    });
    if (outcome.status === "limited") return { retryAfterSeconds: outcome.retryAfterSeconds };
    return outcome.status === "ok" ? "ok" : "invalid";
  }

  /**
   * Runs `check` unless a subject must still wait. The attempt is written before the check, and
   * each subject's earlier attempts are those written before it, so parallel guesses count each
   * other (in the order they were written). The attempt is taken back when the check succeeds
   * or when it was refused unchecked (a guesser's refused attempts do not extend the wait).
   */
  async #limited(subjects: Subject[], check: () => Promise<LoginOutcome>): Promise<LoginOutcome> {
    const db = this.#ctx.db;
    const now = this.#ctx.now();
    const hashed = subjects.map((s) => ({ ...s, hash: hashApiKey(s.name) }));
    const since = new Date(now.getTime() - LOGIN_LIMITS.windowMs);
    const mine = await repo.recordAttempt(
      db,
      hashed.map((s) => s.hash),
      now,
    );
    const ids = mine.map((m) => m.id);
    const earlier = await repo.earlierAttempts(db, mine, since);
    let freeAt = 0;
    for (const subject of hashed) {
      const found = earlier.get(subject.hash);
      const delay = found ? delayAfter(found.count, subject.free) : 0;
      if (found && delay > 0) freeAt = Math.max(freeAt, found.latest.getTime() + delay);
    }
    if (freeAt > now.getTime()) {
      await repo.deleteAttempts(db, ids);
      return {
        status: "limited",
        retryAfterSeconds: Math.max(1, Math.ceil((freeAt - now.getTime()) / 1000)),
      };
    }
    await repo.pruneAttempts(db, since);
    const outcome = await check();
    if (outcome.status !== "invalid") {
      await repo.deleteAttempts(db, ids);
      await repo.clearSubjects(
        db,
        hashed.filter((s) => s.clearedBySuccess).map((s) => s.hash),
      );
    }
    return outcome;
  }
}

/** "45 seconds", "1 minute", "15 minutes": a wait as the pages say it. */
export function waitText(seconds: number): string {
  if (seconds < 60) return `${seconds} second${seconds === 1 ? "" : "s"}`;
  const minutes = Math.ceil(seconds / 60);
  return `${minutes} minute${minutes === 1 ? "" : "s"}`;
}
