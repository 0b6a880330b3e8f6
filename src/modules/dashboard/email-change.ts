import { randomBytes } from "node:crypto";
import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "typebox";
import { pageSecurityHeaders } from "../../platform/http/page-security.ts";
import type { Mailer } from "../../platform/mail/mailer.ts";
import type { WorkspacesService } from "../workspaces/service.ts";
import { html } from "./views/html.ts";
import { bare } from "./views/layout.ts";

// A new admin e-mail takes effect when the link mailed to it is opened (D21): the link carries a
// random token (the database has its hash; WorkspacesService checks it, once, before it
// expires). Opening it needs no session: the new address may be read on another device. The
// token is in the URL's query, which the request log never shows (platform/log/scrub.ts).

export const CONFIRM_PATH = "/dashboard/email/confirm";

/** Mails the confirmation link to the new address. */
export async function mailEmailConfirmation(
  mailer: Mailer,
  publicBaseUrl: string,
  change: { email: string; token: string; expiresAt: Date; workspaceName: string },
): Promise<void> {
  const link = `${publicBaseUrl}${CONFIRM_PATH}?token=${encodeURIComponent(change.token)}`;
  await mailer.send({
    to: change.email,
    subject: "Confirm your new admin e-mail",
    text: [
      `Someone signed in to the dashboard of the workspace "${change.workspaceName}" asked to make`,
      "this address its admin e-mail, the one used to log in. To confirm, open this link:",
      "",
      link,
      "",
      `The link works once, until ${change.expiresAt.toISOString().replace("T", " ").slice(0, 16)} UTC.`,
      "If you did not ask for this, ignore this message: nothing changes unless the link is opened.",
      "",
    ].join("\n"),
  });
}

export const emailConfirmRoutes =
  (services: { workspaces: WorkspacesService }): FastifyPluginAsyncTypebox =>
  async (app) => {
    app.get(
      CONFIRM_PATH,
      { schema: { querystring: Type.Object({ token: Type.String({ minLength: 1, maxLength: 100 }) }) } },
      async (request, reply) => {
        // A refused link is a NotFound: the dashboard's error page says why.
        const confirmed = await services.workspaces.confirmAdminEmail(request.query.token);
        const nonce = randomBytes(16).toString("base64");
        pageSecurityHeaders(reply, { nonce, formAction: "'self'" });
        return reply
          .type("text/html; charset=utf-8")
          .send(
            String(
              bare(
                "Admin e-mail changed",
                nonce,
                html`<section class="error-page"><h1>Admin e-mail changed</h1><p role="status" id="email-confirmed">The admin e-mail is now <strong>${confirmed.email}</strong>. Use it to log in.</p><p><a href="/dashboard/login">Log in</a></p></section>`,
              ),
            ),
          );
      },
    );
  };
