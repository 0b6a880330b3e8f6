import { createHmac, timingSafeEqual } from "node:crypto";
import type { LightMyRequestResponse } from "fastify";
import { expect } from "vitest";
import { WebhookDispatcher } from "../../src/modules/webhooks/dispatcher.ts";
import { bearer, type CreatedWorkspace, createWorkspace, type TestApp } from "./app.ts";
import { DashboardClient } from "./dashboard.ts";
import { WebhookReceiver } from "./receiver.ts";

// What the tests of the dashboard's webhooks section share: signed-in workspaces, local receivers
// and dispatchers driven one claim round at a time (all stopped by `cleanup`), the add form with
// its checkboxes, the API's view of the result, and reading pages and signatures back.

export type Json = Record<string, unknown>;

const PASSWORD = "correct horse battery";
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export class WebhookPagesHarness {
  readonly #t: TestApp;
  readonly #receivers: WebhookReceiver[] = [];
  readonly #dispatchers: WebhookDispatcher[] = [];
  readonly #workspaceIds: string[] = [];
  #ip = 1;

  constructor(t: TestApp) {
    this.#t = t;
  }

  /** A fresh workspace and a browser signed in to it. */
  async signedIn(): Promise<{ ws: CreatedWorkspace; browser: DashboardClient }> {
    const email = `webhooks-${Math.random().toString(36).slice(2, 10)}@shop.example`;
    const ws = await createWorkspace(this.#t, {
      name: "Hooks shop",
      adminEmail: email,
      adminPassword: PASSWORD,
    });
    this.#workspaceIds.push(ws.id);
    const browser = new DashboardClient(this.#t, `198.18.0.${this.#ip++}`);
    const res = await browser.login(email, PASSWORD);
    expect(res.statusCode, res.body).toBe(303);
    return { ws, browser };
  }

  async receiver(): Promise<WebhookReceiver> {
    const r = new WebhookReceiver();
    await r.start();
    this.#receivers.push(r);
    return r;
  }

  /** No retries of its own: a refused delivery is failed at once, and only Resend sends it again. */
  dispatcher(): WebhookDispatcher {
    const d = new WebhookDispatcher(this.#t.app.ctx, { retryDelaysMs: [], random: () => 0.5 });
    this.#dispatchers.push(d);
    return d;
  }

  /** Claim rounds until `done` holds (bounded). */
  async pump(d: WebhookDispatcher, what: string, done: () => Promise<boolean> | boolean): Promise<void> {
    const deadline = Date.now() + 10_000;
    for (;;) {
      await d.runOnce();
      await d.drain();
      if (await done()) return;
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await sleep(25);
    }
  }

  /**
   * A form post with repeated fields (the checkboxes), as a browser sends it; with the current
   * password (the add form's step-up) unless the fields give one.
   */
  postForm(
    browser: DashboardClient,
    url: string,
    fields: Array<[string, string]>,
  ): Promise<LightMyRequestResponse> {
    if (!fields.some(([name]) => name === "currentPassword"))
      fields = [...fields, ["currentPassword", PASSWORD]];
    return this.#t.request({
      method: "POST",
      url,
      headers: {
        cookie: [...browser.cookies].map(([k, v]) => `${k}=${v}`).join("; "),
        "content-type": "application/x-www-form-urlencoded",
      },
      payload: new URLSearchParams(fields).toString(),
      remoteAddress: "198.18.1.1",
    });
  }

  /** Adds a webhook through the dashboard's form; the 201 answer's id and secret. */
  async addWebhook(
    browser: DashboardClient,
    url: string,
    events: string[],
    env = "sandbox",
  ): Promise<{ id: number; secret: string; page: LightMyRequestResponse }> {
    const csrf = await browser.csrf(`/dashboard/${env}/webhooks`);
    const page = await this.postForm(browser, `/dashboard/${env}/webhooks`, [
      ["_csrf", csrf],
      ["url", url],
      ...events.map((e): [string, string] => ["events", e]),
    ]);
    expect(page.statusCode, page.body.slice(0, 500)).toBe(201);
    const body = decode(page.body);
    const secret = /<code [^>]*id="signing-secret">([^<]+)<\/code>/.exec(body)?.[1];
    const id = /href="\/dashboard\/[a-z]+\/webhooks\/([0-9]+)" id="open-webhook"/.exec(body)?.[1];
    if (!secret || !id) throw new Error("no secret or id on the answer");
    return { id: Number(id), secret, page };
  }

  async apiWebhooks(key: string): Promise<Json[]> {
    const res = await this.#t.request({ method: "GET", url: "/api/v1/webhooks", headers: bearer(key) });
    expect(res.statusCode).toBe(200);
    return res.json().webhooks as Json[];
  }

  async apiDeliveries(key: string, id: number): Promise<Json[]> {
    const res = await this.#t.request({
      method: "GET",
      url: `/api/v1/webhooks/${id}/deliveries?limit=100`,
      headers: bearer(key),
    });
    expect(res.statusCode, res.body).toBe(200);
    return res.json().deliveries as Json[];
  }

  /** The `webhook.test` events in a workspace's outbox. */
  async testEvents(workspaceId: string): Promise<unknown[]> {
    return this.#t.database.db
      .selectFrom("outbox_events")
      .select("id")
      .where("workspace_id", "=", workspaceId)
      .where("event_type", "=", "webhook.test")
      .execute();
  }

  /** Stops what a test started; what it left queued must not be claimed by the next test. */
  async cleanup(): Promise<void> {
    await Promise.all(this.#receivers.splice(0).map((r) => r.stop()));
    await Promise.all(this.#dispatchers.splice(0).map((d) => d.stop()));
    const ids = this.#workspaceIds.splice(0);
    if (ids.length === 0) return;
    await this.#t.database.db
      .updateTable("webhook_deliveries")
      .set({ status: "failed", locked_until: null })
      .where("status", "=", "pending")
      .where("endpoint_id", "in", (eb) =>
        eb.selectFrom("webhook_endpoints").select("webhook_endpoints.id").where("workspace_id", "in", ids),
      )
      .execute();
  }
}

/** Undoes the template's escaping (attribute values, text), for reading values back. */
export function decode(body: string): string {
  return body
    .replaceAll("&#x2F;", "/")
    .replaceAll("&#x3D;", "=")
    .replaceAll("&#x60;", "`")
    .replaceAll("&#39;", "'")
    .replaceAll("&quot;", '"')
    .replaceAll("&lt;", "<")
    .replaceAll("&gt;", ">")
    .replaceAll("&amp;", "&");
}

/** The row of one delivery in the log, or undefined. */
export function deliveryRow(body: string, deliveryId: string): string | undefined {
  return new RegExp(`<tr data-delivery-id="${deliveryId}"[\\s\\S]*?</tr>`).exec(decode(body))?.[0];
}

export function hmac(secret: string, data: string): Buffer {
  return createHmac("sha256", Buffer.from(secret, "utf8")).update(Buffer.from(data, "utf8")).digest();
}

/** What a merchant's receiver does: constant-time comparison of the hex digest. */
export function verifies(secret: string, rawBody: string, header: unknown): boolean {
  if (typeof header !== "string" || !/^[0-9a-f]{64}$/.test(header)) return false;
  const expected = hmac(secret, rawBody);
  const given = Buffer.from(header, "hex");
  return given.length === expected.length && timingSafeEqual(given, expected);
}
