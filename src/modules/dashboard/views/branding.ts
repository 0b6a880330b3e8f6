import { type HtmlSafeString, html, nothing } from "./html.ts";

// The checkout branding card of the settings page (D25): what payers see on the hosted page and
// the receipt. No step-up: it moves no money and opens no access, like a payment's description.

export type BrandingField = "displayName" | "brandColor" | "logo";

export interface BrandingForm {
  /** The dashboard's root for this environment (/dashboard/<env>). */
  root: string;
  csrfToken: string;
  /** The workspace's name: what payers see while no display name is set. */
  workspaceName: string;
  displayName: string;
  brandColor: string;
  /** The current logo's sha256, or null when there is none. */
  logoSha256: string | null;
  error?: { field: BrandingField; message: string } | undefined;
}

function described(form: BrandingForm, field: BrandingField, hint: string): HtmlSafeString {
  return form.error?.field === field
    ? html`aria-describedby="${hint} ${field}-error" aria-invalid="true"`
    : html`aria-describedby="${hint}"`;
}

function fieldError(form: BrandingForm, field: BrandingField): HtmlSafeString {
  return form.error?.field === field
    ? html`<p class="field-error" id="${field}-error" role="alert">${form.error.message}</p>`
    : nothing;
}

export function brandingCard(form: BrandingForm): HtmlSafeString {
  const { root } = form;
  const logo = form.logoSha256
    ? html`<p><img class="logo-preview" src="${root}/settings/logo?v=${form.logoSha256.slice(0, 16)}" alt="Current logo" height="48"></p>
<form method="post" action="${root}/settings/logo/remove"><input type="hidden" name="_csrf" value="${form.csrfToken}"><button type="submit" id="remove-logo">Remove logo</button></form>`
    : html`<p class="muted" id="no-logo">No logo: the page shows the name alone.</p>`;
  return html`<section class="card" aria-labelledby="branding-title"><h2 id="branding-title">Checkout branding</h2>
<p class="muted">What payers see on the payment page and the receipt, in sandbox and live alike.</p>
<form method="post" action="${root}/settings/branding" class="stack">
<input type="hidden" name="_csrf" value="${form.csrfToken}">
<label for="displayName">Display name</label>
<input id="displayName" name="displayName" maxlength="80" value="${form.displayName}" placeholder="${form.workspaceName}" ${described(form, "displayName", "displayName-hint")}>
<p class="muted" id="displayName-hint">Empty: the workspace's name, ${form.workspaceName}.</p>
${fieldError(form, "displayName")}
<label for="brandColor">Brand colour</label>
<input id="brandColor" name="brandColor" class="mono" maxlength="7" value="${form.brandColor}" placeholder="#1a73e8" ${described(form, "brandColor", "brandColor-hint")}>
<p class="muted" id="brandColor-hint">Written #rrggbb; empty: the page's own colours. Text on it is black or white, whichever reads better.</p>
${fieldError(form, "brandColor")}
<button type="submit" class="primary" id="save-branding">Save branding</button>
</form>
<h3 class="subsection">Logo</h3>
${logo}
<form method="post" action="${root}/settings/logo" enctype="multipart/form-data" class="stack">
<input type="hidden" name="_csrf" value="${form.csrfToken}">
<label for="logo">${form.logoSha256 ? "Replace the logo" : "Upload a logo"}</label>
<input id="logo" name="logo" type="file" accept="image/png,image/jpeg,image/webp" required ${described(form, "logo", "logo-hint")}>
<p class="muted" id="logo-hint">PNG, JPEG or WebP, at most 256 KiB. Kept by this service and served from its own address.</p>
${fieldError(form, "logo")}
<button type="submit" id="upload-logo">Upload logo</button>
</form></section>`;
}
