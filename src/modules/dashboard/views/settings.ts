import type { Environment } from "../../../config.ts";
import { type BrandingForm, brandingCard } from "./branding.ts";
import { time } from "./format.ts";
import { type HtmlSafeString, html, nothing } from "./html.ts";
import { base } from "./layout.ts";
import { stepUpField } from "./step-up.ts";

// Workspace settings (shared by both environments): settlement address, admin e-mail, password,
// and the checkout branding payers see.
// Saving asks for the current password (step-up, D21); a new admin e-mail waits for the link
// mailed to it.

export interface SettingsForm {
  environment: Environment;
  csrfToken: string;
  settlementAddress: string;
  adminEmail: string;
  hasPassword: boolean;
  /** A new admin e-mail waiting for its link to be opened, and until when the link works. */
  pendingEmail: { email: string; expiresAt: string } | null;
  branding: Omit<BrandingForm, "root" | "csrfToken">;
  /** A refused form: which field, and why (`settingsPassword`: the settings form's step-up). */
  error?:
    | {
        field: "settlementAddress" | "adminEmail" | "settingsPassword" | "currentPassword" | "newPassword";
        message: string;
      }
    | undefined;
}

function fieldError(form: SettingsForm, field: string): HtmlSafeString {
  return form.error?.field === field
    ? html`<p class="field-error" id="${field}-error">${form.error.message}</p>`
    : nothing;
}

function invalid(form: SettingsForm, field: string): HtmlSafeString {
  return form.error?.field === field ? html`aria-invalid="true" aria-describedby="${field}-error"` : nothing;
}

export function settingsBody(form: SettingsForm): HtmlSafeString {
  const root = base(form.environment);
  return html`<section class="card" aria-labelledby="profile-title"><h2 id="profile-title">Workspace</h2>
<p class="muted">These settings apply to sandbox and live alike.</p>
<form method="post" action="${root}/settings" class="stack">
<input type="hidden" name="_csrf" value="${form.csrfToken}">
<label for="settlementAddress">Settlement address</label>
<input id="settlementAddress" name="settlementAddress" class="mono" maxlength="42" value="${form.settlementAddress}" placeholder="0x… (empty: payments name their merchantWallet)" ${invalid(form, "settlementAddress")}>
${fieldError(form, "settlementAddress")}
<label for="adminEmail">Admin e-mail (used to log in)</label>
<input id="adminEmail" name="adminEmail" type="email" maxlength="254" required value="${form.adminEmail}" ${invalid(form, "adminEmail")}>
${fieldError(form, "adminEmail")}
${
  form.pendingEmail
    ? html`<p class="muted" id="pending-email">Waiting for <strong>${form.pendingEmail.email}</strong> to be confirmed: it becomes the admin e-mail when the link mailed to it is opened (until ${time(form.pendingEmail.expiresAt)}).</p>`
    : html`<p class="muted">A new admin e-mail takes effect when the link mailed to it is opened.</p>`
}
${stepUpField("settingsPassword", form.error?.field === "settingsPassword" ? form.error.message : undefined)}
<button type="submit" class="primary" id="save-settings">Save settings</button>
</form></section>
<section class="card" aria-labelledby="password-title"><h2 id="password-title">Password</h2>
<form method="post" action="${root}/settings/password" class="stack">
<input type="hidden" name="_csrf" value="${form.csrfToken}">
<input type="email" name="username" autocomplete="username" value="${form.adminEmail}" hidden>
<label for="currentPassword">Current password</label>
<input id="currentPassword" name="currentPassword" type="password" autocomplete="current-password" required ${invalid(form, "currentPassword")}>
${fieldError(form, "currentPassword")}
<label for="newPassword">New password (12 to 200 characters)</label>
<input id="newPassword" name="newPassword" type="password" autocomplete="new-password" minlength="12" maxlength="200" required ${invalid(form, "newPassword")}>
${fieldError(form, "newPassword")}
<button type="submit" id="change-password">Change password</button>
</form></section>
${brandingCard({ ...form.branding, root, csrfToken: form.csrfToken })}`;
}
