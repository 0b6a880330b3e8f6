import type { FastifyRequest } from "fastify";
import { Forbidden } from "../../domain/errors.ts";
import { constantTimeEqual } from "../../platform/secrets/hashing.ts";
import { field } from "./page-kit.ts";

// A signed-in form proves it came from the dashboard with the session's CSRF token: in `_csrf` of
// its body, or in X-CSRF-Token from our script. The guard checks it before the body is validated;
// a multipart form's body is parsed later (by its own plugin's hook), so its route says so in its
// config and that plugin checks it once parsed. Any other route is checked by the guard.

declare module "fastify" {
  interface FastifyContextConfig {
    /** The route's multipart body is parsed after the guard: its plugin checks the token itself. */
    csrfAfterMultipart?: boolean;
  }
}

export const CSRF_REFUSED =
  "This form has expired or did not come from the dashboard. Reload the page and try again.";

/** Whether the request carries this session's token. */
export function csrfGiven(request: FastifyRequest, expected: string): boolean {
  const header = request.headers["x-csrf-token"];
  const given = typeof header === "string" ? header : field(request.body, "_csrf");
  return given !== undefined && constantTimeEqual(given, expected);
}

/** The check of a multipart route, once its body is parsed (a preValidation hook of its plugin). */
export async function checkMultipartCsrf(request: FastifyRequest): Promise<void> {
  if (!request.routeOptions.config.csrfAfterMultipart) return;
  const session = request.dashboard;
  if (!session || !csrfGiven(request, session.csrfToken)) throw new Forbidden(CSRF_REFUSED);
}
