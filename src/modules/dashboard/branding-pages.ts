import multipart, { type MultipartFile } from "@fastify/multipart";
import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import type { FastifyReply, FastifyRequest } from "fastify";
import { Type } from "typebox";
import { InvalidRequest } from "../../domain/errors.ts";
import { sendStoredImage } from "../../platform/http/cached-image.ts";
import { type BrandingService, LOGO_MAX_BYTES } from "../workspaces/branding.ts";
import { checkMultipartCsrf } from "./csrf.ts";
import { EnvParams, type PageKit } from "./page-kit.ts";
import type { ShowSettings } from "./settings-pages.ts";
import type { BrandingField } from "./views/branding.ts";

// The settings page's checkout branding forms (D25): display name and brand colour, the logo
// uploaded as multipart/form-data (this plugin alone parses it), its removal, and the logo's
// preview. A refused form comes back as the settings page with the field's message.

/**
 * One byte over the limit is read and no more: a longer file arrives cut to LOGO_MAX_BYTES + 1
 * bytes, which the service refuses as too large, so the form can say so (instead of a bare 413).
 */
async function readLogo(part: MultipartFile): Promise<void> {
  const chunks: Buffer[] = [];
  for await (const chunk of part.file) chunks.push(chunk);
  part.value = Buffer.concat(chunks);
}

const CsrfOnly = Type.Object({ _csrf: Type.String({ maxLength: 100 }) });

export const brandingPages =
  (branding: BrandingService, kit: PageKit, show: ShowSettings): FastifyPluginAsyncTypebox =>
  async (app) => {
    await app.register(multipart, {
      attachFieldsToBody: "keyValues",
      onFile: readLogo,
      throwFileSizeLimit: false,
      // The form's two parts (its CSRF token, then the file), and nothing larger than it needs.
      limits: {
        fileSize: LOGO_MAX_BYTES + 1,
        files: 1,
        fields: 2,
        parts: 3,
        fieldSize: 200,
        headerPairs: 20,
      },
    });
    // After multipart's own hook has parsed the body (hooks run in the order they were added).
    app.addHook("preValidation", checkMultipartCsrf);

    /** The service's refusal, shown on the field it concerns; anything else is thrown on. */
    const refusal = (
      request: FastifyRequest,
      reply: FastifyReply,
      env: string,
      err: unknown,
      field: BrandingField,
      typed: { displayName?: string; brandColor?: string } = {},
    ) => {
      if (!(err instanceof InvalidRequest)) throw err;
      reply.status(400);
      const named = err.message.startsWith("brandColor") ? "brandColor" : field;
      return show(request, reply, env, { ...typed, error: { field: named, message: err.message } });
    };

    app.post(
      "/dashboard/:env/settings/branding",
      {
        schema: {
          params: EnvParams,
          body: Type.Object({
            _csrf: Type.String({ maxLength: 100 }),
            displayName: Type.String({ maxLength: 200 }),
            brandColor: Type.String({ maxLength: 50 }),
          }),
        },
      },
      async (request, reply) => {
        const tenant = kit.tenantOf(request, request.params.env);
        const { displayName, brandColor } = request.body;
        // An emptied field clears the value: the page then shows the workspace's own name, colours.
        try {
          await branding.setIdentity(tenant.workspaceId, {
            displayName: displayName.trim() === "" ? null : displayName,
            brandColor: brandColor.trim() === "" ? null : brandColor.trim(),
          });
        } catch (err) {
          return refusal(request, reply, request.params.env, err, "displayName", { displayName, brandColor });
        }
        return kit.done(reply, tenant.environment, "/settings", "branding-saved");
      },
    );

    app.post(
      "/dashboard/:env/settings/logo",
      { config: { csrfAfterMultipart: true }, schema: { params: EnvParams, body: CsrfOnly } },
      async (request, reply) => {
        const tenant = kit.tenantOf(request, request.params.env);
        const file: unknown = Reflect.get(request.body, "logo");
        try {
          if (!Buffer.isBuffer(file)) throw new InvalidRequest("Choose a PNG, JPEG or WebP image to upload");
          await branding.setLogo(tenant.workspaceId, file);
        } catch (err) {
          return refusal(request, reply, request.params.env, err, "logo");
        }
        return kit.done(reply, tenant.environment, "/settings", "logo-saved");
      },
    );

    app.post(
      "/dashboard/:env/settings/logo/remove",
      { schema: { params: EnvParams, body: CsrfOnly } },
      async (request, reply) => {
        const tenant = kit.tenantOf(request, request.params.env);
        await branding.removeLogo(tenant.workspaceId);
        return kit.done(reply, tenant.environment, "/settings", "logo-removed");
      },
    );

    // The preview on the settings page: the signed-in workspace's own logo, kept privately.
    app.get("/dashboard/:env/settings/logo", { schema: { params: EnvParams } }, async (request, reply) => {
      const tenant = kit.tenantOf(request, request.params.env);
      const logo = await branding.logo(tenant.workspaceId);
      if (!logo) return reply.status(404).header("cache-control", "no-store").send("Logo not found");
      return sendStoredImage(request, reply, logo, "private, max-age=300");
    });
  };
