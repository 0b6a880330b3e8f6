import { type HtmlSafeString, html, nothing } from "./html.ts";

// The current password a form asks again before a change that redirects money or opens access
// (D21: step-up). Never filled in: a refused form comes back with it empty.

export function stepUpField(id: string, error: string | undefined): HtmlSafeString {
  const described = `${id}-hint${error ? ` ${id}-error` : ""}`;
  return html`<div class="field step-up"><label for="${id}">Current password</label>
<input id="${id}" name="currentPassword" type="password" autocomplete="current-password" required maxlength="200" aria-describedby="${described}" ${error ? html`aria-invalid="true"` : nothing}>
<p class="hint" id="${id}-hint">Asked again for this change, every time.</p>
${error ? html`<p class="field-error" id="${id}-error" role="alert">${error}</p>` : nothing}</div>`;
}
