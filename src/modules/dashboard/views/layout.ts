import type { Environment } from "../../../config.ts";
import { type HtmlSafeString, html, nothing } from "./html.ts";

// The frame of every signed-in page: the workspace, the sandbox/live switch, the navigation, the
// sandbox banner, and the logout form. One script and one stylesheet of ours, nothing else.

export interface PageFrame {
  title: string;
  environment: Environment;
  workspaceName: string;
  /** The session's CSRF token, for the page's forms (and for our script's requests). */
  csrfToken: string;
  nonce: string;
  /** Which entry of the navigation is current. */
  section: Section;
  /** The same page in the other environment (the switch keeps the viewer where they are). */
  path: string;
  notice?: string | undefined;
}

export type Section =
  | "overview"
  | "payments"
  | "payouts"
  | "splits"
  | "webhooks"
  | "keys"
  | "wallets"
  | "agents"
  | "approvals"
  | "unmatched"
  | "settings";

// Refunds (D19) are on the payment's page; returns and attaches in the unmatched inbox.
const SECTIONS: Array<[Section, string, string]> = [
  ["overview", "Overview", ""],
  ["payments", "Payments", "/payments"],
  ["payouts", "Payouts", "/payouts"],
  ["splits", "Splits", "/splits"],
  ["webhooks", "Webhooks", "/webhooks"],
  ["keys", "API keys", "/keys"],
  ["wallets", "Wallets", "/wallets"],
  ["agents", "Agent wallets", "/agents"],
  ["approvals", "Approvals", "/approvals"],
  ["unmatched", "Unmatched transfers", "/unmatched"],
  ["settings", "Settings", "/settings"],
];

export function base(environment: Environment): string {
  return `/dashboard/${environment}`;
}

/** The document's head: our stylesheet only; `extra` adds meta tags (the CSRF token). */
function head(title: string, extra: HtmlSafeString = nothing): HtmlSafeString {
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
${extra}
<link rel="icon" href="data:,">
<title>${title} · Dashboard</title>
<link rel="stylesheet" href="/dashboard/assets/dashboard.css">
<link rel="stylesheet" href="/dashboard/assets/pages.css">
</head>`;
}

export function page(frame: PageFrame, body: HtmlSafeString): HtmlSafeString {
  const other: Environment = frame.environment === "sandbox" ? "live" : "sandbox";
  const root = base(frame.environment);
  return html`${head(`${frame.title} · ${frame.workspaceName}`, html`<meta name="csrf-token" content="${frame.csrfToken}">`)}
<body class="env-${frame.environment}">
<a class="skip" href="#main">Skip to content</a>
${
  frame.environment === "sandbox"
    ? html`<div class="sandbox-banner" role="note"><strong>Sandbox</strong> — test data, no real money moves. <a href="/dashboard/live${frame.path}">Switch to live</a></div>`
    : nothing
}
<header class="top">
  <span class="workspace">${frame.workspaceName}</span>
  <nav class="env-switch" aria-label="Environment">
    <a href="/dashboard/sandbox${frame.path}" ${frame.environment === "sandbox" ? html`aria-current="page"` : nothing}>Sandbox</a>
    <a href="/dashboard/live${frame.path}" ${frame.environment === "live" ? html`aria-current="page"` : nothing}>Live</a>
  </nav>
  <form method="post" action="/dashboard/logout" class="logout">
    <input type="hidden" name="_csrf" value="${frame.csrfToken}">
    <button type="submit">Log out</button>
  </form>
</header>
<nav class="sections" aria-label="Sections">
  <ul>${SECTIONS.map(
    ([section, label, path]) =>
      html`<li><a href="${root}${path}" ${section === frame.section ? html`aria-current="page"` : nothing}>${label}</a></li>`,
  )}</ul>
</nav>
<main id="main" tabindex="-1">
<h1>${frame.title}</h1>
${frame.notice ? html`<p class="notice" role="status">${frame.notice}</p>` : nothing}
${body}
</main>
<p class="env-footer">Viewing <strong>${frame.environment}</strong> data · <a href="/dashboard/${other}${frame.path}">Switch to ${other}</a></p>
<script nonce="${frame.nonce}" src="/dashboard/assets/dashboard.js" defer></script>
</body>
</html>`;
}

/** A page outside the signed-in frame (login, not found). */
export function bare(title: string, nonce: string, body: HtmlSafeString): HtmlSafeString {
  return html`${head(title)}
<body class="bare">
<main id="main">
${body}
</main>
<script nonce="${nonce}" src="/dashboard/assets/dashboard.js" defer></script>
</body>
</html>`;
}
