import type { Environment } from "../../../config.ts";
import { ALL_EVENTS, EVENT_TYPES } from "../../../domain/events.ts";
import type { DeliveryView, WebhookView } from "../../webhooks/service.ts";
import { copyButton, empty, facts, status, time } from "./format.ts";
import { type HtmlSafeString, html, nothing } from "./html.ts";
import { base } from "./layout.ts";
import { stepUpField } from "./step-up.ts";

// The webhooks section: the environment's registrations with the form that adds one, the answer
// that shows a new registration's signing secret (once: no other page has it), and a webhook's
// page with its facts, delete, send a test event, rotate its secret (the answer shows the new one
// once), and its delivery log with Resend.

/** The add form as typed, and the service's refusal next to the field it is about. */
export interface WebhookForm {
  url: string;
  events: string[];
  error?: { field: "url" | "events" | "currentPassword"; message: string } | undefined;
}

export const EMPTY_FORM: WebhookForm = { url: "", events: [] };

function eventsText(events: readonly string[]): string {
  return events.map((e) => (e === ALL_EVENTS ? "All events (*)" : e)).join(", ");
}

function state(w: WebhookView): HtmlSafeString {
  return status(w.active ? "active" : "disabled");
}

function webhookRows(environment: Environment, webhooks: WebhookView[]): HtmlSafeString {
  const root = base(environment);
  return html`<div class="table-wrap"><table class="list" id="webhooks-table">
<thead><tr><th scope="col">URL</th><th scope="col">Events</th><th scope="col">State</th><th scope="col">Created</th><th scope="col">Details</th></tr></thead>
<tbody>${webhooks.map(
    (w) => html`<tr data-webhook-id="${w.id}">
<td class="wh-url mono">${w.url}</td><td class="wh-events">${eventsText(w.events)}</td><td>${state(w)}</td>
<td>${time(w.created_at)}</td><td><a href="${root}/webhooks/${w.id}">Deliveries and settings<span class="visually-hidden"> of webhook ${w.id}</span></a></td></tr>`,
  )}</tbody></table></div>`;
}

function urlHint(environment: Environment): string {
  return environment === "live" ? "https only, on a public address." : "http or https, on a public address.";
}

function addForm(environment: Environment, csrfToken: string, form: WebhookForm): HtmlSafeString {
  const root = base(environment);
  const err = form.error;
  const urlError = err?.field === "url";
  const eventsError = err?.field === "events";
  const chosen = new Set(form.events);
  const choice = (value: string, label: string) =>
    html`<li><label><input type="checkbox" name="events" value="${value}" ${chosen.has(value) ? html`checked` : nothing}> ${label}</label></li>`;
  return html`<section class="card" aria-labelledby="add-title"><h2 id="add-title">Add a webhook</h2>
<form method="post" action="${root}/webhooks" class="wh-form" id="add-webhook" novalidate>
<input type="hidden" name="_csrf" value="${csrfToken}">
<div class="field"><label for="wh-url">Endpoint URL</label>
<input id="wh-url" name="url" type="url" required maxlength="2048" autocomplete="url" value="${form.url}" aria-describedby="wh-url-hint${urlError ? " wh-url-error" : ""}" ${urlError ? html`aria-invalid="true" autofocus` : nothing}>
<p class="wh-hint" id="wh-url-hint">${urlHint(environment)}</p>
${urlError ? html`<p class="field-error" id="wh-url-error" role="alert">${err.message}</p>` : nothing}</div>
<fieldset class="wh-events-choice" ${eventsError ? html`aria-describedby="wh-events-error"` : nothing}>
<legend>Events to send</legend>
<ul>${choice(ALL_EVENTS, "All events (*), including kinds added later")}${EVENT_TYPES.map((e) => choice(e, e))}</ul>
${eventsError ? html`<p class="field-error" id="wh-events-error" role="alert">${err.message}</p>` : nothing}
</fieldset>
${stepUpField("wh-password", err?.field === "currentPassword" ? err.message : undefined)}
<div class="actions"><button type="submit" class="primary">Add webhook</button></div>
</form></section>`;
}

export function webhooksListBody(options: {
  environment: Environment;
  csrfToken: string;
  webhooks: WebhookView[];
  form: WebhookForm;
}): HtmlSafeString {
  return html`<section aria-labelledby="list-title"><h2 id="list-title">Registered endpoints</h2>
${
  options.webhooks.length === 0
    ? empty(
        `No webhooks in ${options.environment} yet.`,
        html`<p>Add one below to receive signed events at your server.</p>`,
      )
    : webhookRows(options.environment, options.webhooks)
}</section>
${addForm(options.environment, options.csrfToken, options.form)}`;
}

function webhookFacts(w: WebhookView): HtmlSafeString {
  return facts([
    ["Id", html`<span class="mono">${w.id}</span>`],
    ["URL", html`<span class="mono">${w.url}</span> ${copyButton(w.url, "Copy URL")}`],
    ["Events", eventsText(w.events)],
    [
      "State",
      w.active
        ? state(w)
        : html`${state(w)} <span class="muted">failed for 5 days without a success; register the endpoint again to receive events</span>`,
    ],
    ["Created", time(w.created_at)],
  ]);
}

/** The answer to adding a webhook (201): the only page that ever shows its signing secret. */
export function webhookCreatedBody(options: {
  environment: Environment;
  webhook: WebhookView & { signingSecret: string };
}): HtmlSafeString {
  const root = base(options.environment);
  const w = options.webhook;
  return html`<section class="card wh-secret" aria-labelledby="secret-title"><h2 id="secret-title">Signing secret</h2>
<p role="status"><strong>Copy this secret now.</strong> It is shown only once: this page cannot be opened again, and no other page shows it.</p>
<p><code class="mono wh-secret-value" id="signing-secret">${w.signingSecret}</code> ${copyButton(w.signingSecret, "Copy secret")}</p>
<p class="muted">Your server checks each delivery's <code>webhook-signature</code> (Standard Webhooks) or <code>X-Service-Signature-V2</code> header with it.</p>
</section>
<section class="card" aria-labelledby="created-title"><h2 id="created-title">Webhook ${w.id}</h2>${webhookFacts(w)}
<p><a href="${root}/webhooks/${w.id}" id="open-webhook">Open this webhook</a> · <a href="${root}/webhooks">All webhooks</a></p></section>`;
}

/** The answer to rotating a webhook's secret: the only page that ever shows the new one. */
export function webhookRotatedBody(options: {
  environment: Environment;
  webhook: { id: number; signingSecret: string };
}): HtmlSafeString {
  const root = base(options.environment);
  const w = options.webhook;
  return html`<section class="card wh-secret" aria-labelledby="secret-title"><h2 id="secret-title">New signing secret of webhook ${w.id}</h2>
<p role="status"><strong>Copy this secret now.</strong> It is shown only once: this page cannot be opened again, and no other page shows it.</p>
<p><code class="mono wh-secret-value" id="signing-secret">${w.signingSecret}</code> ${copyButton(w.signingSecret, "Copy secret")}</p>
<p class="muted">For 24 hours each delivery's <code>webhook-signature</code> carries a signature with this secret and one with the previous secret, so your server can switch over; <code>X-Service-Signature</code> and <code>X-Service-Signature-V2</code> use the new secret from now on. Rotating again within the 24 hours ends the previous secret at once.</p>
<p><a href="${root}/webhooks/${w.id}" id="open-webhook">Back to this webhook</a> · <a href="${root}/webhooks">All webhooks</a></p></section>`;
}

/** Rotate secret: a new secret, with the current password asked again (step-up). */
function rotateForm(here: string, csrf: HtmlSafeString, error: string | undefined): HtmlSafeString {
  return html`<section class="card" aria-labelledby="rotate-title"><h2 id="rotate-title">Signing secret</h2>
<p class="muted">Rotating issues a new secret, shown once. For 24 hours deliveries are signed with both the new and the previous secret (<code>webhook-signature</code>); the <code>X-Service-Signature</code> headers switch to the new one at once.</p>
<form method="post" action="${here}/rotate-secret" class="wh-form" id="rotate-secret-form" data-confirm="Rotate this webhook's signing secret? The new secret is shown once.">${csrf}
${stepUpField("rotate-password", error)}
<div class="actions"><button type="submit" id="rotate-secret">Rotate secret</button></div>
</form></section>`;
}

function lastResponse(d: DeliveryView): HtmlSafeString {
  if (d.lastResponseCode === null && d.lastError === null) return html`<span class="muted">—</span>`;
  // The dispatcher records a refusal's status as its error too ("HTTP 500"): shown once.
  const error = d.lastError && d.lastError !== `HTTP ${d.lastResponseCode}` ? d.lastError : null;
  return html`${d.lastResponseCode !== null ? html`HTTP ${d.lastResponseCode}` : nothing}${d.lastResponseCode !== null && error ? html`<br>` : nothing}${error ? html`<span class="wh-error-text">${error}</span>` : nothing}`;
}

function when(d: DeliveryView): HtmlSafeString {
  if (d.deliveredAt) return html`delivered ${time(d.deliveredAt)}`;
  if (d.nextAttemptAt) return html`next attempt ${time(d.nextAttemptAt)}`;
  return html`<span class="muted">—</span>`;
}

export interface DeliveryPage {
  deliveries: DeliveryView[];
  total: number;
  /** 1-based. */
  page: number;
  pageSize: number;
}

function deliveryLog(root: string, webhookId: number, csrfToken: string, log: DeliveryPage): HtmlSafeString {
  const here = `${root}/webhooks/${webhookId}`;
  if (log.deliveries.length === 0) {
    return log.total === 0
      ? empty("No deliveries yet.", html`<p>Send a test event to see one arrive.</p>`)
      : empty("No deliveries on this page.", html`<p><a href="${here}">Newest deliveries</a></p>`);
  }
  const first = (log.page - 1) * log.pageSize + 1;
  const last = first + log.deliveries.length - 1;
  return html`<p class="muted" id="delivery-count">Deliveries ${first}–${last} of ${log.total}, newest first.</p>
<div class="table-wrap"><table class="list" id="deliveries-table">
<thead><tr><th scope="col">Created</th><th scope="col">Event</th><th scope="col">Status</th><th scope="col" class="num">Attempts</th><th scope="col">Last response</th><th scope="col">Delivered / next</th><th scope="col">Delivery id</th><th scope="col">Action</th></tr></thead>
<tbody>${log.deliveries.map(
    (d) => html`<tr data-delivery-id="${d.id}" data-status="${d.status}">
<td>${time(d.createdAt)}</td><td>${d.event}</td><td>${status(d.status)}</td><td class="num">${d.attempts}</td>
<td>${lastResponse(d)}</td><td>${when(d)}</td><td><span class="mono" title="${d.id}">${d.id.slice(0, 8)}</span></td>
<td><form method="post" action="${here}/deliveries/${d.id}/retry" class="inline">
<input type="hidden" name="_csrf" value="${csrfToken}">
${log.page > 1 ? html`<input type="hidden" name="page" value="${log.page}">` : nothing}
<button type="submit" aria-label="Resend ${d.event} delivery ${d.id.slice(0, 8)}">Resend</button></form></td></tr>`,
  )}</tbody></table></div>
<nav class="pager" aria-label="Delivery pages">${
    log.page > 1 ? html`<a id="newer-page" href="${here}?page=${log.page - 1}">← Newer</a> ` : nothing
  }${last < log.total ? html`<a id="older-page" href="${here}?page=${log.page + 1}">Older →</a>` : nothing}</nav>`;
}

export function webhookDetailBody(options: {
  environment: Environment;
  csrfToken: string;
  webhook: WebhookView;
  log: DeliveryPage;
  /** Why the last Rotate secret was refused (its current password), shown next to the field. */
  rotateError?: string | undefined;
}): HtmlSafeString {
  const root = base(options.environment);
  const w = options.webhook;
  const here = `${root}/webhooks/${w.id}`;
  const csrf = html`<input type="hidden" name="_csrf" value="${options.csrfToken}">`;
  return html`<p><a href="${root}/webhooks">← Webhooks</a></p>
<section class="card" aria-labelledby="webhook-title"><h2 id="webhook-title">Webhook ${w.id}</h2>
${webhookFacts(w)}
<div class="wh-actions">
${
  w.active
    ? html`<form method="post" action="${here}/test" class="inline">${csrf}
<button type="submit" class="primary" id="send-test">Send test event</button></form>`
    : nothing
}
<form method="post" action="${here}/delete" class="inline" data-confirm="Delete this webhook? Its queued deliveries stop and it receives no more events.">${csrf}
<button type="submit" class="danger" id="delete-webhook">Delete webhook</button></form>
</div>
${w.active ? html`<p class="muted">A test event (<code>webhook.test</code>) goes to this endpoint only, whatever events it subscribed to.</p>` : nothing}
</section>
${rotateForm(here, csrf, options.rotateError)}
<section class="card" aria-labelledby="log-title"><h2 id="log-title">Delivery log</h2>
${deliveryLog(root, w.id, options.csrfToken, options.log)}
</section>`;
}
