import { createHash } from "node:crypto";
import type { AppContext } from "../../context.ts";
import { badRequest, notFound } from "../../domain/errors.ts";
import { isUuid } from "../../domain/validation.ts";
import * as repo from "./branding-repo.ts";

// A workspace's checkout branding (D25): the display name, brand colour and logo its payers see
// on the hosted page. A logo's type is decided by its first bytes, never by the name or type a
// client gives it: only PNG, JPEG and WebP are kept (an SVG can carry script, GIF is not offered).

/** The largest logo kept: the page shows it small, and every instance reads it from the database. */
export const LOGO_MAX_BYTES = 256 * 1024;
export const LOGO_TYPES = ["image/png", "image/jpeg", "image/webp"] as const;
export type LogoType = (typeof LOGO_TYPES)[number];

const COLOR = /^#[0-9a-fA-F]{6}$/;

/** The image type these bytes start with, or null for anything else. */
export function logoTypeOf(bytes: Uint8Array): LogoType | null {
  const starts = (offset: number, ...signature: number[]) =>
    signature.every((byte, i) => bytes[offset + i] === byte);
  if (starts(0, 0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a)) return "image/png";
  if (starts(0, 0xff, 0xd8, 0xff)) return "image/jpeg";
  // RIFF....WEBP
  if (starts(0, 0x52, 0x49, 0x46, 0x46) && starts(8, 0x57, 0x45, 0x42, 0x50)) return "image/webp";
  return null;
}

/** A display name as stored: trimmed, 1 to 80 characters; null clears it. */
export function normaliseDisplayName(value: string | null): string | null {
  if (value === null) return null;
  const trimmed = value.trim();
  if (trimmed.length < 1 || trimmed.length > 80) throw badRequest("displayName must be 1 to 80 characters");
  return trimmed;
}

/** A brand colour as stored: lower-case `#rrggbb`; null clears it. */
export function normaliseBrandColor(value: string | null): string | null {
  if (value === null) return null;
  if (!COLOR.test(value)) throw badRequest("brandColor must be a colour written #rrggbb");
  return value.toLowerCase();
}

export interface BrandingView {
  displayName: string | null;
  brandColor: string | null;
  /** The logo's sha256, or null when there is none. */
  logoSha256: string | null;
}

export class BrandingService {
  readonly #ctx: AppContext;

  constructor(ctx: AppContext) {
    this.#ctx = ctx;
  }

  async get(workspaceId: string): Promise<repo.Branding> {
    const found = isUuid(workspaceId) ? await repo.findBranding(this.#ctx.db, workspaceId) : undefined;
    if (!found) throw notFound("Workspace not found");
    return found;
  }

  /** Sets what is given (undefined: unchanged, null: cleared). */
  async setIdentity(
    workspaceId: string,
    input: { displayName?: string | null | undefined; brandColor?: string | null | undefined },
  ): Promise<repo.Branding> {
    const values: { displayName?: string | null; brandColor?: string | null } = {};
    if (input.displayName !== undefined) values.displayName = normaliseDisplayName(input.displayName);
    if (input.brandColor !== undefined) values.brandColor = normaliseBrandColor(input.brandColor);
    if (!isUuid(workspaceId) || !(await repo.updateIdentity(this.#ctx.db, workspaceId, values)))
      throw notFound("Workspace not found");
    return this.get(workspaceId);
  }

  async setLogo(workspaceId: string, bytes: Uint8Array): Promise<{ contentType: LogoType; sha256: string }> {
    if (bytes.length > LOGO_MAX_BYTES) throw badRequest("The logo is larger than 256 KiB (262144 bytes)");
    if (bytes.length === 0) throw badRequest("The logo is empty");
    const contentType = logoTypeOf(bytes);
    if (!contentType) throw badRequest("The logo must be a PNG, JPEG or WebP image");
    await this.get(workspaceId);
    const sha256 = createHash("sha256").update(bytes).digest("hex");
    await repo.upsertLogo(this.#ctx.db, { workspaceId, contentType, bytes, sha256, now: this.#ctx.now() });
    return { contentType, sha256 };
  }

  async removeLogo(workspaceId: string): Promise<void> {
    await this.get(workspaceId);
    await repo.deleteLogo(this.#ctx.db, workspaceId);
  }

  /** The workspace's own logo (the dashboard's preview, a payment's page), or undefined when it has none. */
  async logo(workspaceId: string) {
    return isUuid(workspaceId) ? repo.findLogo(this.#ctx.db, workspaceId) : undefined;
  }
}
