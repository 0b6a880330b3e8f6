import { type HtmlSafeString, html, nothing } from "./html.ts";
import { bare } from "./layout.ts";

// The login form. The e-mail typed is kept on an error; the password never is.

export interface LoginForm {
  nonce: string;
  /** The login form's own CSRF token (double-submitted with its cookie). */
  csrfToken: string;
  email?: string;
  error?: string;
  /** Several workspaces share the e-mail and the password: pick one. */
  workspaces?: Array<{ id: string; name: string }>;
}

export function loginPage(form: LoginForm): HtmlSafeString {
  const choose = form.workspaces && form.workspaces.length > 0;
  return bare(
    "Log in",
    form.nonce,
    html`<section class="login" aria-labelledby="login-title">
<h1 id="login-title">Log in to the dashboard</h1>
${form.error ? html`<p class="error" role="alert" id="login-error">${form.error}</p>` : nothing}
<form method="post" action="/dashboard/login" novalidate>
  <input type="hidden" name="_csrf" value="${form.csrfToken}">
  <label for="email">E-mail</label>
  <input id="email" name="email" type="email" autocomplete="username" required value="${form.email ?? ""}"
    ${form.error ? html`aria-describedby="login-error"` : nothing}>
  <label for="password">Password</label>
  <input id="password" name="password" type="password" autocomplete="current-password" required
    ${choose ? html`autofocus` : nothing}>
  ${
    choose
      ? html`<label for="workspace">Workspace</label>
  <select id="workspace" name="workspaceId" required>${form.workspaces?.map(
    (w) => html`<option value="${w.id}">${w.name} (${w.id.slice(0, 8)})</option>`,
  )}</select>`
      : nothing
  }
  <button type="submit" class="primary">Log in</button>
</form>
</section>`,
  );
}
