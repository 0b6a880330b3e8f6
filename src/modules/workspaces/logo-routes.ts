import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "typebox";
import { badRequest } from "../../domain/errors.ts";
import { assertWorkspaceAccess } from "../../platform/http/auth.ts";
import { documentedBodyOnly } from "../../platform/http/validation.ts";
import { type BrandingService, LOGO_TYPES } from "./branding.ts";

// The checkout logo over the API (D25), beside the dashboard's upload: the image itself as the
// body (image/png, image/jpeg or image/webp), as Stripe's file uploads and most image APIs take
// it. Only this plugin parses image bodies; the service decides the type by the first bytes,
// whatever the Content-Type said, and refuses anything over 256 KiB.

const LogoAnswer = Type.Object({
  logo: Type.Object({
    contentType: Type.Enum([...LOGO_TYPES]),
    sha256: Type.String({ description: "The logo's sha256 (hex): the hosted page's ETag for it" }),
    bytes: Type.Integer(),
  }),
});

const IdParams = Type.Object({ id: Type.String() });

export const workspaceLogoRoutes =
  (branding: BrandingService): FastifyPluginAsyncTypebox =>
  async (app) => {
    // Up to the API's body limit (1 MiB, as JSON), so that the service names the logo's own limit
    // (256 KiB) for a body between the two; a larger one is the API's 413.
    app.addContentTypeParser(
      [...LOGO_TYPES],
      { parseAs: "buffer", bodyLimit: 1024 * 1024 },
      (_request, body, done) => done(null, body),
    );

    app.put(
      "/api/v1/workspaces/:id/logo",
      {
        config: { auth: "key-or-admin" },
        schema: {
          tags: ["Workspaces"],
          summary:
            "Set the checkout logo payers see: the image as the body (PNG, JPEG or WebP, at most 256 KiB)",
          security: [{ apiKey: [] }, { adminSecret: [] }],
          params: IdParams,
          consumes: [...LOGO_TYPES],
          body: Type.Unsafe<Buffer>({ type: "string", format: "binary" }),
          response: { 200: LogoAnswer },
        },
        // The body is bytes, checked by the service: the schema above only documents it.
        validatorCompiler: documentedBodyOnly,
      },
      async (request) => {
        assertWorkspaceAccess(request, request.params.id);
        const body: unknown = request.body;
        if (!Buffer.isBuffer(body))
          throw badRequest(
            "Send the image as the body, with Content-Type image/png, image/jpeg or image/webp",
          );
        const saved = await branding.setLogo(request.params.id, body);
        return { logo: { ...saved, bytes: body.length } };
      },
    );

    app.delete(
      "/api/v1/workspaces/:id/logo",
      {
        config: { auth: "key-or-admin" },
        schema: {
          tags: ["Workspaces"],
          summary: "Remove the checkout logo: the hosted page shows the name alone",
          security: [{ apiKey: [] }, { adminSecret: [] }],
          params: IdParams,
          response: { 200: Type.Object({ success: Type.Literal(true) }) },
        },
      },
      async (request) => {
        assertWorkspaceAccess(request, request.params.id);
        await branding.removeLogo(request.params.id);
        return { success: true as const };
      },
    );
  };
