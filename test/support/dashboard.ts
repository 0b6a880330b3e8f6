import type { LightMyRequestResponse } from "fastify";
import { expect } from "vitest";
import { type CreatedWorkspace, createWorkspace, type TestApp } from "./app.ts";

// A browser's side of the dashboard's forms, over inject: cookies kept per "browser", the login
// form's CSRF token read from the page, urlencoded posts.

export class DashboardClient {
  readonly #t: TestApp;
  readonly cookies = new Map<string, string>();
  readonly #ip: string;

  constructor(t: TestApp, ip = "203.0.113.7") {
    this.#t = t;
    this.#ip = ip;
  }

  #keep(res: LightMyRequestResponse): void {
    for (const c of res.cookies) {
      if (c.value === "" || (c.expires && c.expires.getTime() <= Date.now())) this.cookies.delete(c.name);
      else this.cookies.set(c.name, c.value);
    }
  }

  #cookieHeader(): string {
    return [...this.cookies].map(([k, v]) => `${k}=${v}`).join("; ");
  }

  async get(url: string): Promise<LightMyRequestResponse> {
    const res = await this.#t.request({
      method: "GET",
      url,
      headers: { cookie: this.#cookieHeader() },
      remoteAddress: this.#ip,
    });
    this.#keep(res);
    return res;
  }

  async post(
    url: string,
    form: Record<string, string>,
    headers: Record<string, string> = {},
  ): Promise<LightMyRequestResponse> {
    const res = await this.#t.request({
      method: "POST",
      url,
      headers: {
        cookie: this.#cookieHeader(),
        "content-type": "application/x-www-form-urlencoded",
        ...headers,
      },
      payload: new URLSearchParams(form).toString(),
      remoteAddress: this.#ip,
    });
    this.#keep(res);
    return res;
  }

  /** A multipart/form-data post, as a form with a file input sends it (the body built by undici). */
  async postMultipart(
    url: string,
    fields: Record<string, string>,
    file?: { name: string; filename: string; type: string; bytes: Uint8Array },
  ): Promise<LightMyRequestResponse> {
    const form = new FormData();
    for (const [name, value] of Object.entries(fields)) form.append(name, value);
    if (file)
      form.append(file.name, new Blob([new Uint8Array(file.bytes)], { type: file.type }), file.filename);
    const encoded = new Response(form);
    const res = await this.#t.request({
      method: "POST",
      url,
      headers: {
        cookie: this.#cookieHeader(),
        "content-type": encoded.headers.get("content-type") ?? "",
      },
      payload: Buffer.from(await encoded.arrayBuffer()),
      remoteAddress: this.#ip,
    });
    this.#keep(res);
    return res;
  }

  /** Opens the login page and submits it; the response of the POST. */
  async login(
    email: string,
    password: string,
    extra: Record<string, string> = {},
  ): Promise<LightMyRequestResponse> {
    const page = await this.get("/dashboard/login");
    expect(page.statusCode).toBe(200);
    return this.post("/dashboard/login", { email, password, _csrf: formToken(page.body), ...extra });
  }

  /** The CSRF token a signed-in page carries for its forms. */
  async csrf(url = "/dashboard/sandbox"): Promise<string> {
    const page = await this.get(url);
    expect(page.statusCode, page.body.slice(0, 300)).toBe(200);
    return formToken(page.body);
  }
}

export function formToken(body: string): string {
  const match = /name="_csrf" value="([^"]+)"/.exec(body);
  if (!match?.[1]) throw new Error("no CSRF token on the page");
  return match[1];
}

/** The admin password of the dashboard suites' workspaces. */
export const ADMIN_PASSWORD = "correct horse battery";

/** A workspace whose admin (an e-mail of its own, `prefix`-…) signs in with ADMIN_PASSWORD. */
export async function dashboardWorkspace(
  t: TestApp,
  prefix: string,
  name: string,
): Promise<{ ws: CreatedWorkspace; email: string }> {
  const email = `${prefix}-${Math.random().toString(36).slice(2, 8)}@shop.example`;
  const ws = await createWorkspace(t, { name, adminEmail: email, adminPassword: ADMIN_PASSWORD });
  return { ws, email };
}

/** A browser from `ip`, signed in as `email`. */
export async function signedInAs(
  t: TestApp,
  ip: string,
  email: string,
  password = ADMIN_PASSWORD,
): Promise<DashboardClient> {
  const browser = new DashboardClient(t, ip);
  const res = await browser.login(email, password);
  expect(res.statusCode, res.body.slice(0, 400)).toBe(303);
  return browser;
}
