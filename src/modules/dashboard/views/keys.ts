import type { Environment } from "../../../config.ts";
import { copyButton, empty, time } from "./format.ts";
import { type HtmlSafeString, html, nothing } from "./html.ts";
import { base } from "./layout.ts";
import { stepUpField } from "./step-up.ts";

// API keys of one environment: create (the key is shown once, on the answer to the form) and
// revoke (after a confirmation). The list shows prefixes only: the service keeps hashes. A live
// key is created only with the current password (step-up, D21).

export interface KeyRow {
  id: string;
  prefix: string;
  name: string | null;
  createdAt: string;
  lastUsedAt: string | null;
  revokedAt: string | null;
}

export function keysBody(options: {
  environment: Environment;
  keys: KeyRow[];
  csrfToken: string;
  /** The key just created: shown this once. */
  created?: { key: string; name: string | null } | undefined;
  error?: string | undefined;
  /** The step-up's refusal (live keys ask for the current password). */
  passwordError?: string | undefined;
  name?: string | undefined;
}): HtmlSafeString {
  const root = base(options.environment);
  const created = options.created
    ? html`<section class="card secret" aria-labelledby="new-key-title" id="new-key">
<h2 id="new-key-title">Your new ${options.environment} key${options.created.name ? html` “${options.created.name}”` : nothing}</h2>
<p><strong>Copy it now: it will not be shown again.</strong></p>
<p class="copy-row"><input id="new-key-value" readonly value="${options.created.key}" aria-label="New API key"> ${copyButton(options.created.key, "Copy key")}</p>
</section>`
    : nothing;
  return html`${created}
<section class="card" aria-labelledby="create-key-title"><h2 id="create-key-title">Create a key</h2>
<form method="post" action="${root}/keys" class="row-form">
<input type="hidden" name="_csrf" value="${options.csrfToken}">
<div class="field grow"><label for="key-name">Name (optional)</label><input id="key-name" name="name" maxlength="200" value="${options.name ?? ""}" ${options.error ? html`aria-invalid="true" aria-describedby="key-name-error"` : nothing}>
${options.error ? html`<p class="field-error" id="key-name-error">${options.error}</p>` : nothing}</div>
${options.environment === "live" ? stepUpField("key-password", options.passwordError) : nothing}
<button type="submit" class="primary" id="create-key">Create ${options.environment} key</button>
</form></section>
<section aria-labelledby="keys-title"><h2 id="keys-title">Keys</h2>
${
  options.keys.length === 0
    ? empty("No keys in this environment.")
    : html`<div class="table-wrap"><table class="list" id="keys-table"><thead><tr><th scope="col">Key</th><th scope="col">Name</th><th scope="col" class="wide-only">Created</th><th scope="col">Last used</th><th scope="col">State</th><th scope="col"><span class="visually-hidden">Actions</span></th></tr></thead>
<tbody>${options.keys.map(
        (
          k,
        ) => html`<tr data-key-id="${k.id}"><td class="mono nowrap">${k.prefix}…</td><td>${k.name ?? ""}</td><td class="wide-only">${time(k.createdAt)}</td><td>${time(k.lastUsedAt)}</td>
<td>${k.revokedAt ? html`<span class="status status-failed">revoked</span> ${time(k.revokedAt)}` : html`<span class="status status-active">active</span>`}</td>
<td>${
          k.revokedAt
            ? nothing
            : html`<form method="post" action="${root}/keys/${k.id}/revoke" class="inline" data-confirm="Revoke the key ${k.prefix}…? Requests using it will be refused at once.">
<input type="hidden" name="_csrf" value="${options.csrfToken}"><button type="submit" class="danger" aria-label="Revoke key ${k.prefix}">Revoke</button></form>`
        }</td></tr>`,
      )}</tbody></table></div>`
}</section>`;
}
