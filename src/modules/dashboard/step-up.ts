import type { FastifyReply, FastifyRequest } from "fastify";
import { Unauthorized } from "../../domain/errors.ts";
import { type Logins, waitText } from "./login.ts";
import { field } from "./page-kit.ts";

// Step-up (D21): changing the settlement address, the admin e-mail, splits, an agent wallet's
// spending policy or the password, creating a live API key, registering a webhook or rotating its
// secret, and approving or denying an agent's payment ask for the current password again, every
// time, in the form's `currentPassword` field. It is checked before anything is changed, and
// limited per session and per client address like a login (login.ts).

/** Why a form's current password was refused: the status and the message shown next to it. */
export interface StepUpRefusal {
  status: 400 | 429;
  message: string;
}

/** Checks the form's current password: null when it is right, else the refusal (Retry-After set). */
export async function stepUp(
  logins: Logins,
  request: FastifyRequest,
  reply: FastifyReply,
): Promise<StepUpRefusal | null> {
  const session = request.dashboard;
  if (!session) throw new Unauthorized("Sign in to the dashboard first");
  const password = field(request.body, "currentPassword") ?? "";
  if (password === "")
    return { status: 400, message: "Enter your current password to make this change: nothing was changed" };
  const checked = await logins.checkPassword({
    workspaceId: session.workspaceId,
    sessionId: session.sessionId,
    password,
    clientAddress: request.ip,
  });
  if (checked === "ok") return null;
  if (checked === "invalid")
    return { status: 400, message: "The current password is not right: nothing was changed" };
  reply.header("retry-after", String(checked.retryAfterSeconds));
  return {
    status: 429,
    message: `Too many wrong passwords. Try again in ${waitText(checked.retryAfterSeconds)}: nothing was changed`,
  };
}
