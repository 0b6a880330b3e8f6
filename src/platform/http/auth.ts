import type {} from "@fastify/cookie";
import type { FastifyInstance, FastifyRequest } from "fastify";
import type { Environment } from "../../config.ts";
import { type AppError, forbidden, RateLimited, Unauthorized, unauthorized } from "../../domain/errors.ts";
import { constantTimeEqual } from "../secrets/hashing.ts";

// Authentication of part 5: a Bearer token is either a workspace API key (svc_test_/svc_live_)
// or the operator's admin secret. Each route says which it accepts in `config.auth`; the key
// lookup itself belongs to the keys module and is handed in as `resolveKey`.

export type AuthMode = "none" | "key" | "admin" | "key-or-admin" | "session";

export type Principal =
  | { kind: "key"; keyId: string; workspaceId: string; environment: Environment }
  | { kind: "admin" }
  | { kind: "session"; workspaceId: string; sessionId: string };

export type SessionResolution = { workspaceId: string; csrfToken: string; sessionId: string } | null;

export type KeyPrincipal = Extract<Principal, { kind: "key" }>;

/** Whose data a request reads or changes: a key's workspace and environment, or a dashboard session's. */
export type Tenant = Pick<KeyPrincipal, "workspaceId" | "environment">;

export type KeyResolution =
  | { status: "ok"; principal: KeyPrincipal }
  | { status: "revoked" }
  | { status: "unknown" };

/**
 * Failed authentication per client address (issue 20), kept in the rate limits' store (rate-limit.ts
 * sets it up). Both answer the seconds to wait when the address is over its limit, else null.
 */
export interface FailedAuthLimiter {
  /** Reads the address's state without counting. */
  retryAfter(request: FastifyRequest): Promise<number | null>;
  /** Counts one failed attempt. */
  fail(request: FastifyRequest): Promise<number | null>;
}

declare module "fastify" {
  interface FastifyRequest {
    principal: Principal | null;
  }
  interface FastifyContextConfig {
    auth?: AuthMode;
  }
  interface FastifyInstance {
    /** Set by registerRateLimit; until then failures are not limited. */
    failedAuthLimiter: FailedAuthLimiter | null;
  }
}

const KEY_PATTERN = /^svc_(test|live)_[0-9A-Za-z]{32,}$/;

export interface AuthOptions {
  adminSecret: string | undefined;
  resolveKey: (key: string) => Promise<KeyResolution>;
  /** Dashboard sessions: the cookie's token → its workspace and CSRF token. */
  sessionCookie: string;
  resolveSession: (token: string) => Promise<SessionResolution>;
}

const SAFE_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);

/** Browser session auth (D12): a valid session cookie, and the CSRF token on state changes. */
async function authenticateSession(request: FastifyRequest, options: AuthOptions): Promise<Principal> {
  const token = request.cookies?.[options.sessionCookie];
  const session = token ? await options.resolveSession(token) : null;
  if (!session) throw unauthorized("Sign in to the dashboard first");
  if (!SAFE_METHODS.has(request.method)) {
    const header = request.headers["x-csrf-token"];
    const given = Array.isArray(header) ? header[0] : header;
    if (!given || !constantTimeEqual(given, session.csrfToken))
      throw forbidden("Missing or invalid CSRF token");
  }
  return { kind: "session", workspaceId: session.workspaceId, sessionId: session.sessionId };
}

export function registerAuth(app: FastifyInstance, options: AuthOptions): void {
  app.decorateRequest("principal", null);
  app.decorate("failedAuthLimiter", null);
  app.addHook("onRequest", async (request) => {
    if (request.is404) return;
    const mode = request.routeOptions.config.auth ?? "key";
    if (mode === "none") return;
    request.principal =
      mode === "session"
        ? await authenticateSession(request, options)
        : await authenticate(request, mode, options, app.failedAuthLimiter);
  });
}

export function tooManyFailures(retryAfterSeconds: number): RateLimited {
  return new RateLimited(
    "Too many failed authentication attempts from this address: try again after Retry-After seconds",
    retryAfterSeconds,
  );
}

/**
 * Failed attempts are counted per client address; over the limit they are answered 429 instead of
 * 401. A valid API key is served whatever its address has done: keys are too long to guess, and a
 * client behind the attacker's NAT or proxy keeps working. The admin secret is chosen by the
 * operator and may be guessable, so from an address over the limit it is not checked at all (a
 * different answer would tell the guesser it is right).
 */
async function authenticate(
  request: FastifyRequest,
  mode: AuthMode,
  options: AuthOptions,
  limiter: FailedAuthLimiter | null,
): Promise<Principal> {
  const failed = async (message: string): Promise<AppError> => {
    const wait = await limiter?.fail(request);
    return wait ? tooManyFailures(wait) : unauthorized(message);
  };
  const header = request.headers.authorization;
  // Not an attempt at a credential, so not counted.
  if (!header) throw unauthorized("Missing API key: send Authorization: Bearer <API_KEY>");
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  if (!match?.[1]) throw await failed("Malformed Authorization header: expected Bearer <API_KEY>");
  const token = match[1];

  if (options.adminSecret !== undefined && constantTimeEqual(token, options.adminSecret)) {
    const wait = await limiter?.retryAfter(request);
    if (wait) throw tooManyFailures(wait);
    if (mode === "admin" || mode === "key-or-admin") return { kind: "admin" };
    throw forbidden("The admin secret is not accepted here: use a workspace API key");
  }
  if (!KEY_PATTERN.test(token)) {
    throw await failed(mode === "admin" ? "Invalid admin secret" : "Invalid API key");
  }
  const resolution = await options.resolveKey(token);
  if (resolution.status === "revoked") throw await failed("API key has been revoked");
  if (resolution.status === "unknown") throw await failed("Invalid API key");
  if (mode === "admin") throw forbidden("This endpoint requires the admin secret");
  return resolution.principal;
}

/** The caller's key, for routes that accept only keys. */
export function requireKey(request: FastifyRequest): KeyPrincipal {
  const principal = request.principal;
  if (principal?.kind !== "key") throw new Unauthorized("Invalid API key");
  return principal;
}

/**
 * A workspace id in the URL must be the key's own workspace (rule 1 of part 5 → 403); the admin
 * secret may act for any workspace.
 */
export function assertWorkspaceAccess(request: FastifyRequest, workspaceId: string): void {
  const principal = request.principal;
  if (principal?.kind === "admin") return;
  if (principal?.kind === "key" && principal.workspaceId === workspaceId) return;
  throw forbidden("This API key does not belong to that workspace");
}

/**
 * The environment whose settings a request reads or changes (D21): a key's own, and no other (a
 * sandbox key never reaches live: naming the other environment is 403); the admin secret's and a
 * dashboard session's live unless `requested` (the `environment` query parameter) says sandbox.
 */
export function settingsEnvironment(
  request: FastifyRequest,
  requested: Environment | undefined,
): Environment {
  const principal = request.principal;
  if (principal?.kind === "key") {
    if (requested !== undefined && requested !== principal.environment) {
      throw forbidden(
        `A ${principal.environment} key reads and sets the ${principal.environment} settings only: environment=${requested} needs a ${requested} key or the admin secret`,
      );
    }
    return principal.environment;
  }
  return requested ?? "live";
}
