import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { registerSubscribe } from "../../src/platform/db/notices.ts";
import {
  bearer,
  type CreatedWorkspace,
  createWorkspace,
  sandboxPayment,
  startTestApp,
  type TestApp,
} from "../support/app.ts";

// The hosted page's status stream (D25), over a real HTTP connection: the first event, a change
// woken by the database's notice or committed before listening began, the end after a final
// status, the limits, and the app's close.

let t: TestApp;
let ws: CreatedWorkspace;
let base: string;

beforeAll(async () => {
  t = await startTestApp({
    RATE_LIMIT_SANDBOX: "100000",
    HOSTED_PAGE_SSE_PER_PAYMENT: "2",
    HOSTED_PAGE_SSE_PER_ADDRESS: "3",
  });
  ws = await createWorkspace(t, { name: "Streams Co" });
  base = await t.app.http.listen({ host: "127.0.0.1", port: 0 });
});

afterAll(async () => {
  await t?.close();
});

/** A pending payment, as the page first sees one. */
const payment = (app: TestApp = t, key = ws.testKey) => sandboxPayment(app, key, { pending: true });

/** A stream's text as it arrives; `until` resolves once it matches, failing after `ms`. */
async function open(id: string, at = base) {
  const controller = new AbortController();
  const res = await fetch(`${at}/pay/${id}/events`, { signal: controller.signal });
  const reader = res.body?.getReader();
  const decoder = new TextDecoder();
  let text = "";
  let done = false;
  const until = async (pattern: RegExp, ms = 2000) => {
    const deadline = Date.now() + ms;
    while (!pattern.test(text)) {
      if (done) throw new Error(`stream ended without ${pattern}: ${text}`);
      const left = deadline - Date.now();
      if (left <= 0 || !reader) throw new Error(`no ${pattern} within ${ms} ms: ${text}`);
      const chunk = await Promise.race([
        reader.read(),
        new Promise<null>((resolve) => setTimeout(() => resolve(null), left)),
      ]);
      if (chunk === null) continue;
      if (chunk.done) done = true;
      else text += decoder.decode(chunk.value, { stream: true });
    }
  };
  const ended = async (ms = 2000) => {
    const deadline = Date.now() + ms;
    while (!done) {
      const left = deadline - Date.now();
      if (left <= 0 || !reader) throw new Error(`stream still open after ${ms} ms`);
      const chunk = await Promise.race([
        reader.read(),
        new Promise<null>((resolve) => setTimeout(() => resolve(null), left)),
      ]);
      if (chunk?.done) done = true;
      else if (chunk) text += decoder.decode(chunk.value, { stream: true });
    }
  };
  return { res, until, ended, close: () => controller.abort(), text: () => text };
}

describe("GET /pay/:id/events", () => {
  it("sends the status at once, a change within 2 s, and ends after a final one", async () => {
    const id = await payment();
    const stream = await open(id);
    expect(stream.res.status).toBe(200);
    expect(stream.res.headers.get("content-type")).toBe("text/event-stream");
    expect(stream.res.headers.get("cache-control")).toBe("no-store");
    await stream.until(
      /event: status\ndata: \{"status":"[a-z_]+","expiresAt":"[^"]+","refunded":false\}\n\n/,
    );
    expect(stream.text().startsWith("retry: 3000\n\n")).toBe(true);

    const cancelled = await t.request({
      method: "POST",
      url: `/api/v1/payments/${id}/cancel`,
      headers: bearer(ws.testKey),
    });
    expect(cancelled.statusCode, cancelled.body).toBe(200);
    await stream.until(/"status":"cancelled"/);
    await stream.ended();
  });

  it("answers 404 JSON for an unknown or malformed id", async () => {
    for (const id of ["00000000-0000-4000-8000-000000000000", "nope"]) {
      const res = await fetch(`${base}/pay/${id}/events`);
      expect(res.status).toBe(404);
      expect(await res.json()).toHaveProperty("error");
    }
  });

  it("answers 429 beyond the streams allowed per payment and per address", async () => {
    const id = await payment();
    const a = await open(id);
    const b = await open(id);
    await a.until(/event: status/);
    await b.until(/event: status/);
    const third = await fetch(`${base}/pay/${id}/events`);
    expect(third.status).toBe(429);
    expect(await third.json()).toHaveProperty("error");

    const other = await open(await payment());
    await other.until(/event: status/);
    const fourth = await fetch(`${base}/pay/${await payment()}/events`);
    expect(fourth.status).toBe(429);
    for (const s of [a, b, other]) s.close();
  });

  it("sends a change committed before its LISTEN is active once it is, well within the 10 s re-read", async () => {
    // An app of its own whose listening session starts only when the test says (and never
    // delivers a notice): the change can then only come from a read once listening is confirmed.
    const own = await startTestApp({ RATE_LIMIT_SANDBOX: "100000" });
    try {
      const w = await createWorkspace(own);
      let subscribed!: () => void;
      const subscribing = new Promise<void>((resolve) => {
        subscribed = resolve;
      });
      let activate!: () => void;
      const active = new Promise<void>((resolve) => {
        activate = resolve;
      });
      registerSubscribe(own.database.db, async () => {
        subscribed();
        await active;
        return async () => {};
      });
      const url = await own.app.http.listen({ host: "127.0.0.1", port: 0 });
      const id = await payment(own, w.testKey);
      const stream = await open(id, url);
      await stream.until(/"status":"pending"/);
      await subscribing;

      const cancelled = await own.request({
        method: "POST",
        url: `/api/v1/payments/${id}/cancel`,
        headers: bearer(w.testKey),
      });
      expect(cancelled.statusCode, cancelled.body).toBe(200);
      activate();
      await stream.until(/"status":"cancelled"/, 3000);
      await stream.ended();
    } finally {
      await own.close();
    }
  });

  it("lets the app close with a stream open", async () => {
    const own = await startTestApp({ RATE_LIMIT_SANDBOX: "100000" });
    const w = await createWorkspace(own);
    const url = await own.app.http.listen({ host: "127.0.0.1", port: 0 });
    const stream = await fetch(`${url}/pay/${await payment(own, w.testKey)}/events`);
    expect(stream.status).toBe(200);
    const reader = stream.body?.getReader();
    await reader?.read();
    const closed = own.close().then(() => "closed");
    const outcome = await Promise.race([
      closed,
      new Promise((resolve) => setTimeout(() => resolve("hung"), 5000)),
    ]);
    expect(outcome).toBe("closed");
  });
});
