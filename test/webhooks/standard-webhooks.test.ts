import { createHmac, randomBytes } from "node:crypto";
import { Webhook } from "standardwebhooks";
import { afterEach, describe, expect, it, vi } from "vitest";
import * as repo from "../../src/modules/webhooks/repo.ts";
import { bearer } from "../support/app.ts";
import type { ReceivedRequest } from "../support/receiver.ts";
import {
  DAY,
  deliveryId,
  harness,
  header,
  hmacHex,
  type Json,
  until,
  verifies,
} from "../support/webhook-delivery.ts";

// Standard Webhooks 1.0 on every delivery (D24): webhook-id, webhook-timestamp and
// webhook-signature, checked by what a merchant would run, the `standardwebhooks` package; the
// secret formats (new padded base64, older base64url) and rotation with its 24 h overlap.
// Deliveries are real: the dispatcher POSTs to a local receiver.

const NEW_SECRET = /^whsec_[A-Za-z0-9+/]{43}=$/;

/** The three Standard Webhooks headers of a received request, as the library takes them. */
function swHeaders(r: ReceivedRequest): Record<string, string> {
  return {
    "webhook-id": header(r, "webhook-id"),
    "webhook-timestamp": header(r, "webhook-timestamp"),
    "webhook-signature": header(r, "webhook-signature"),
  };
}

/** Verifies as a merchant's receiver would, with the clock at `at` (ms) when given. */
function stockVerify(secret: string | Webhook, r: ReceivedRequest, at?: number, body = r.rawBody): unknown {
  if (at !== undefined) vi.useFakeTimers({ toFake: ["Date"], now: at });
  try {
    const wh = typeof secret === "string" ? new Webhook(secret) : secret;
    return wh.verify(body, swHeaders(r));
  } finally {
    vi.useRealTimers();
  }
}

const verifiesWith = (secret: string, r: ReceivedRequest, at?: number) => {
  try {
    stockVerify(secret, r, at);
    return true;
  } catch {
    return false;
  }
};

/** An old-format secret: unpadded base64url of 32 bytes, with a `-` or `_` in it. */
function oldFormatSecret(): string {
  for (;;) {
    const encoded = randomBytes(32).toString("base64url");
    if (/[-_]/.test(encoded)) return `whsec_${encoded}`;
  }
}

describe("Standard Webhooks headers", () => {
  const h = harness();
  afterEach(() => vi.useRealTimers());

  it("a delivery verifies with the standardwebhooks package; a tampered body, a wrong secret and a stale timestamp do not", async () => {
    const receiver = await h.receiver();
    const ws = await h.workspace();
    const hook = await h.register(ws.testKey, receiver.url, ["payment.created"]);
    h.dispatcher().start();
    await h.createPayment(ws.testKey);
    const [r] = (await receiver.waitFor(1)) as [ReceivedRequest];

    // The same delivery id and unix seconds as our own headers, and one v1 signature.
    expect(header(r, "webhook-id")).toBe(deliveryId(r));
    expect(header(r, "webhook-timestamp")).toBe(header(r, "x-service-timestamp"));
    expect(header(r, "webhook-signature")).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/);

    // The library verifies it and gives the parsed body back.
    expect(stockVerify(hook.secret, r)).toEqual(r.json);
    // Our headers are as before.
    expect(verifies(hook.secret, r.rawBody, r.headers["x-service-signature"])).toBe(true);
    const ts = header(r, "x-service-timestamp");
    expect(header(r, "x-service-signature-v2")).toBe(
      `v1=${hmacHex(hook.secret, `${ts}.${r.rawBody}`).toString("hex")}`,
    );

    // A tampered body.
    const tampered = r.rawBody.replace('"payment.created"', '"payment.failed"');
    expect(tampered).not.toBe(r.rawBody);
    expect(() => stockVerify(hook.secret, r, undefined, tampered)).toThrow(/signature/i);
    // A wrong secret (a well-formed one).
    expect(() => stockVerify(`whsec_${randomBytes(32).toString("base64")}`, r)).toThrow(/signature/i);
    // A stale timestamp: the receiver's clock 10 minutes after the attempt.
    expect(() => stockVerify(hook.secret, r, Number(ts) * 1000 + 10 * 60_000)).toThrow(/too old/i);
  });

  it("issues new secrets as whsec_ + padded standard base64 of 32 bytes, which the library accepts", async () => {
    const ws = await h.workspace();
    for (let i = 0; i < 8; i++) {
      const hook = await h.register(ws.testKey, `http://127.0.0.1:9/hook-${i}`, ["payment.created"]);
      expect(hook.secret).toMatch(NEW_SECRET);
      const encoded = hook.secret.slice("whsec_".length);
      const bytes = Buffer.from(encoded, "base64");
      expect(bytes).toHaveLength(32);
      expect(bytes.toString("base64")).toBe(encoded);
      // The library takes it as it is, and keys with exactly those 32 bytes.
      const at = new Date(1_700_000_000_000);
      expect(new Webhook(hook.secret).sign("msg_1", at, "{}")).toBe(
        `v1,${createHmac("sha256", bytes).update("msg_1.1700000000.{}").digest("base64")}`,
      );
    }
  });

  it("an old-format (base64url) secret keeps our headers and signs webhook-signature under its decoded bytes", async () => {
    const receiver = await h.receiver();
    const ws = await h.workspace();
    const old = oldFormatSecret();
    const row = await repo.insertEndpoint(
      h.t.database.db,
      { workspaceId: ws.id, environment: "sandbox" },
      { url: receiver.url, events: ["payment.created"], encryptedSecret: h.t.app.ctx.secrets.encrypt(old) },
    );
    h.dispatcher().start();
    await h.createPayment(ws.testKey);
    const [r] = (await receiver.waitFor(1)) as [ReceivedRequest];
    expect(header(r, "webhook-id")).toBe(deliveryId(r));

    // Our headers: keyed with the whole secret's UTF-8 bytes, exactly as before.
    const ts = header(r, "x-service-timestamp");
    expect(verifies(old, r.rawBody, r.headers["x-service-signature"])).toBe(true);
    expect(header(r, "x-service-signature-v2")).toBe(
      `v1=${hmacHex(old, `${ts}.${r.rawBody}`).toString("hex")}`,
    );

    // Standard Webhooks: HMAC-SHA256 of "{id}.{ts}.{body}" keyed with the base64url-decoded bytes.
    const key = Buffer.from(old.slice("whsec_".length), "base64url");
    expect(key).toHaveLength(32);
    const expected = createHmac("sha256", key)
      .update(`${header(r, "webhook-id")}.${header(r, "webhook-timestamp")}.${r.rawBody}`)
      .digest("base64");
    expect(header(r, "webhook-timestamp")).toBe(ts);
    expect(header(r, "webhook-signature")).toBe(`v1,${expected}`);
    // The library verifies it given those bytes raw; taking the old secret as it is, it cannot
    // (hence "rotate once" in the docs).
    expect(stockVerify(new Webhook(key, { format: "raw" }), r)).toEqual(r.json);
    expect(() => stockVerify(old, r)).toThrow();
    await until("delivered", async () => (await h.deliveries(ws.testKey, row.id))[0]?.status === "delivered");
  });
});

describe("rotating a webhook's signing secret", () => {
  const h = harness();
  afterEach(() => vi.useRealTimers());

  const rotate = (key: string, id: number | string) =>
    h.t.request({ method: "POST", url: `/api/v1/webhooks/${id}/rotate-secret`, headers: bearer(key) });

  it("answers 200 with a new secret; 404 for another workspace's webhook, an unknown id and a malformed one", async () => {
    const ws = await h.workspace();
    const other = await h.workspace();
    const hook = await h.register(ws.testKey, "http://127.0.0.1:9/hook", ["payment.created"]);
    const before = await h.t.database.db
      .selectFrom("webhook_endpoints")
      .select(["encrypted_secret"])
      .where("id", "=", hook.id)
      .executeTakeFirstOrThrow();

    for (const res of [
      await rotate(other.testKey, hook.id),
      await rotate(ws.liveKey, hook.id),
      await rotate(ws.testKey, 999_999_999),
      await rotate(ws.testKey, "abc"),
    ]) {
      expect(res.statusCode, res.body).toBe(404);
      expect(res.body).not.toContain("whsec_");
    }
    const untouched = await h.t.database.db
      .selectFrom("webhook_endpoints")
      .select(["encrypted_secret", "previous_encrypted_secret"])
      .where("id", "=", hook.id)
      .executeTakeFirstOrThrow();
    expect(untouched).toEqual({ encrypted_secret: before.encrypted_secret, previous_encrypted_secret: null });

    const res = await rotate(ws.testKey, hook.id);
    expect(res.statusCode, res.body).toBe(200);
    const body = res.json() as { webhook: Json };
    expect(Object.keys(body.webhook).sort()).toEqual(["id", "signingSecret"]);
    expect(body.webhook.id).toBe(hook.id);
    const fresh = String(body.webhook.signingSecret);
    expect(fresh).toMatch(NEW_SECRET);
    expect(fresh).not.toBe(hook.secret);

    // Both secrets are stored encrypted, never as they are.
    const row = await h.t.database.db
      .selectFrom("webhook_endpoints")
      .select(["encrypted_secret", "previous_encrypted_secret", "previous_secret_expires_at"])
      .where("id", "=", hook.id)
      .executeTakeFirstOrThrow();
    expect(row.previous_encrypted_secret).toBe(before.encrypted_secret);
    expect(h.t.app.ctx.secrets.decrypt(row.encrypted_secret)).toBe(fresh);
    for (const stored of [row.encrypted_secret, row.previous_encrypted_secret ?? ""]) {
      expect(stored.startsWith("v1:")).toBe(true);
      expect(stored).not.toContain(fresh.slice(6));
      expect(stored).not.toContain(hook.secret.slice(6));
    }
    const expires = row.previous_secret_expires_at?.getTime() ?? 0;
    expect(Math.abs(expires - (Date.now() + DAY))).toBeLessThan(60_000);
  });

  it("for 24 h deliveries carry two v1 signatures (new first) that verify with both secrets; then only the new one", async () => {
    const receiver = await h.receiver();
    const ws = await h.workspace();
    const hook = await h.register(ws.testKey, receiver.url, ["payment.created"]);
    const res = await rotate(ws.testKey, hook.id);
    expect(res.statusCode, res.body).toBe(200);
    const fresh = String(res.json().webhook.signingSecret);
    h.dispatcher().start();

    await h.createPayment(ws.testKey);
    const [during] = (await receiver.waitFor(1)) as [ReceivedRequest];
    const signatures = header(during, "webhook-signature").split(" ");
    expect(signatures).toHaveLength(2);
    for (const s of signatures) expect(s).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/);
    const id = header(during, "webhook-id");
    const ts = new Date(Number(header(during, "webhook-timestamp")) * 1000);
    expect(signatures[0]).toBe(new Webhook(fresh).sign(id, ts, during.rawBody));
    expect(signatures[1]).toBe(new Webhook(hook.secret).sign(id, ts, during.rawBody));
    expect(verifiesWith(fresh, during)).toBe(true);
    expect(verifiesWith(hook.secret, during)).toBe(true);
    expect(verifiesWith(`whsec_${randomBytes(32).toString("base64")}`, during)).toBe(false);
    // Our own headers use the new secret alone.
    expect(verifies(fresh, during.rawBody, during.headers["x-service-signature"])).toBe(true);
    expect(verifies(hook.secret, during.rawBody, during.headers["x-service-signature"])).toBe(false);

    // 24 h and a minute later (the app's clock): the old secret no longer signs.
    const later = Date.now() + DAY + 60_000;
    h.t.setNow(new Date(later));
    await h.createPayment(ws.testKey);
    const after = await receiver.waitFor(1, (r) => deliveryId(r) !== deliveryId(during));
    const [r] = after as [ReceivedRequest];
    expect(Math.abs(Number(header(r, "webhook-timestamp")) * 1000 - later)).toBeLessThan(60_000);
    expect(header(r, "webhook-signature").split(" ")).toHaveLength(1);
    const at = Number(header(r, "webhook-timestamp")) * 1000;
    expect(verifiesWith(fresh, r, at)).toBe(true);
    expect(verifiesWith(hook.secret, r, at)).toBe(false);
    expect(verifies(fresh, r.rawBody, r.headers["x-service-signature"])).toBe(true);
  });

  it("rotating again within the 24 h drops the oldest secret: the two latest sign", async () => {
    const receiver = await h.receiver();
    const ws = await h.workspace();
    const hook = await h.register(ws.testKey, receiver.url, ["payment.created"]);
    const first = await rotate(ws.testKey, hook.id);
    const second = await rotate(ws.testKey, hook.id);
    expect([first.statusCode, second.statusCode]).toEqual([200, 200]);
    const middle = String(first.json().webhook.signingSecret);
    const latest = String(second.json().webhook.signingSecret);
    expect(new Set([hook.secret, middle, latest]).size).toBe(3);
    h.dispatcher().start();

    await h.createPayment(ws.testKey);
    const [r] = (await receiver.waitFor(1)) as [ReceivedRequest];
    expect(header(r, "webhook-signature").split(" ")).toHaveLength(2);
    expect(verifiesWith(latest, r)).toBe(true);
    expect(verifiesWith(middle, r)).toBe(true);
    expect(verifiesWith(hook.secret, r)).toBe(false);
    await until("delivered", async () => {
      const log = await h.deliveries(ws.testKey, hook.id);
      return log[0]?.status === "delivered";
    });
  });
});
