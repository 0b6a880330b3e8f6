import { createHash } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { payerView } from "../../src/modules/hosted-page/loader.ts";
import {
  ADMIN_SECRET,
  bearer,
  type CreatedWorkspace,
  createWorkspace,
  sandboxPayment,
  startTestApp,
  type TestApp,
} from "../support/app.ts";

// A workspace's checkout branding (D25): display name and brand colour over the API, the logo
// kept by its magic bytes, served at /pay/<payment>/logo for that payment's workspace only, and
// the merchant the hosted page's loader reads.

let t: TestApp;
let ws: CreatedWorkspace;
let other: CreatedWorkspace;

const PNG = Buffer.concat([
  Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
  Buffer.from("fake png body"),
]);
const JPEG = Buffer.concat([Buffer.from([0xff, 0xd8, 0xff, 0xe0]), Buffer.from("jpeg body")]);
const WEBP = Buffer.concat([Buffer.from("RIFF"), Buffer.from([1, 2, 3, 4]), Buffer.from("WEBPVP8 ")]);
const SVG = Buffer.from('<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>');
const GIF = Buffer.from("GIF89a....");

beforeAll(async () => {
  t = await startTestApp({ RATE_LIMIT_SANDBOX: "100000" });
  ws = await createWorkspace(t, { name: "Branding Co" });
  other = await createWorkspace(t, { name: "Other Co" });
});

afterAll(async () => {
  await t?.close();
});

function patch(id: string, key: string, payload: object) {
  return t.request({ method: "PATCH", url: `/api/v1/workspaces/${id}`, headers: bearer(key), payload });
}

const payment = (key: string) => sandboxPayment(t, key);

function merchantOf(paymentId: string) {
  const load = payerView(t.app.ctx, t.app.services.payments, t.app.services.workspaces);
  return load(paymentId, false).then((view) => view?.merchant);
}

describe("display name and brand colour", () => {
  it("are set, normalised, read back and cleared", async () => {
    const set = await patch(ws.id, ws.testKey, { displayName: "  Blue Mug Shop  ", brandColor: "#A1B2C3" });
    expect(set.statusCode, set.body).toBe(200);
    expect(set.json().workspace).toMatchObject({ displayName: "Blue Mug Shop", brandColor: "#a1b2c3" });
    const read = await t.request({
      method: "GET",
      url: `/api/v1/workspaces/${ws.id}`,
      headers: bearer(ws.testKey),
    });
    expect(read.json().workspace).toMatchObject({ displayName: "Blue Mug Shop", brandColor: "#a1b2c3" });

    const id = await payment(ws.testKey);
    expect(await merchantOf(id)).toEqual({ name: "Blue Mug Shop", logoUrl: null, brandColor: "#a1b2c3" });

    const cleared = await patch(ws.id, ws.testKey, { displayName: null, brandColor: null });
    expect(cleared.statusCode, cleared.body).toBe(200);
    expect(cleared.json().workspace).toMatchObject({ displayName: null, brandColor: null });
    expect(await merchantOf(id)).toEqual({ name: "Branding Co", logoUrl: null, brandColor: null });
  });

  it("refuses a bad name or colour with a 400 naming it", async () => {
    for (const [payload, word] of [
      [{ displayName: "   " }, "displayName"],
      [{ displayName: "x".repeat(81) }, "displayName"],
      [{ brandColor: "red" }, "brandColor"],
      [{ brandColor: "#12345g" }, "brandColor"],
    ] as const) {
      const res = await patch(ws.id, ws.testKey, payload);
      expect(res.statusCode, res.body).toBe(400);
      expect(res.body).toContain(word);
    }
  });

  it("is another workspace's key's to change only with access", async () => {
    const res = await patch(ws.id, other.testKey, { displayName: "Hijacked" });
    expect(res.statusCode).toBeGreaterThanOrEqual(403);
    expect(res.statusCode).toBeLessThan(405);
    const admin = await patch(ws.id, ADMIN_SECRET, { brandColor: "#000000" });
    expect(admin.statusCode, admin.body).toBe(200);
  });
});

describe("logo", () => {
  it("is typed by its magic bytes: PNG, JPEG and WebP kept, SVG, GIF and text refused", async () => {
    const branding = t.app.services.branding;
    expect((await branding.setLogo(ws.id, JPEG)).contentType).toBe("image/jpeg");
    expect((await branding.setLogo(ws.id, WEBP)).contentType).toBe("image/webp");
    expect((await branding.setLogo(ws.id, PNG)).contentType).toBe("image/png");
    for (const bytes of [SVG, GIF, Buffer.from("hello"), Buffer.alloc(0)]) {
      await expect(branding.setLogo(ws.id, bytes)).rejects.toMatchObject({ code: "INVALID_REQUEST" });
    }
    await expect(branding.setLogo(ws.id, Buffer.concat([PNG, Buffer.alloc(256 * 1024)]))).rejects.toThrow(
      /256 KiB/,
    );
  });

  it("is served for the payment's own workspace with its type, cache headers and ETag", async () => {
    await t.app.services.branding.setLogo(ws.id, PNG);
    const sha = createHash("sha256").update(PNG).digest("hex");
    const id = await payment(ws.testKey);
    const res = await t.request({ method: "GET", url: `/pay/${id}/logo` });
    expect(res.statusCode).toBe(200);
    expect(res.headers["content-type"]).toBe("image/png");
    expect(res.headers["cache-control"]).toBe("public, max-age=300");
    expect(res.headers.etag).toBe(`"${sha}"`);
    expect(res.headers["content-security-policy"]).toBeDefined();
    expect(Buffer.compare(res.rawPayload, PNG)).toBe(0);

    const again = await t.request({
      method: "GET",
      url: `/pay/${id}/logo`,
      headers: { "if-none-match": `"${sha}"` },
    });
    expect(again.statusCode).toBe(304);
    expect(again.body).toBe("");

    expect((await merchantOf(id))?.logoUrl).toBe(`/pay/${id}/logo?v=${sha.slice(0, 12)}`);
  });

  it("is never another workspace's, and a missing one or payment is a 404 JSON", async () => {
    await t.app.services.branding.setLogo(ws.id, PNG);
    const theirs = await payment(other.testKey);
    const res = await t.request({ method: "GET", url: `/pay/${theirs}/logo` });
    expect(res.statusCode).toBe(404);
    expect(res.json()).toEqual({ error: "Logo not found" });
    expect((await merchantOf(theirs))?.logoUrl).toBeNull();

    for (const url of ["/pay/00000000-0000-4000-8000-000000000000/logo", "/pay/not-a-uuid/logo"]) {
      const missing = await t.request({ method: "GET", url });
      expect(missing.statusCode).toBe(404);
      expect(missing.json()).toHaveProperty("error");
    }
  });

  it("once removed is gone from the page and its URL", async () => {
    await t.app.services.branding.setLogo(ws.id, PNG);
    const id = await payment(ws.testKey);
    await t.app.services.branding.removeLogo(ws.id);
    expect((await t.request({ method: "GET", url: `/pay/${id}/logo` })).statusCode).toBe(404);
    expect((await merchantOf(id))?.logoUrl).toBeNull();
  });
});

describe("logo over the API: PUT and DELETE /api/v1/workspaces/{id}/logo", () => {
  const put = (id: string, key: string, bytes: Buffer, contentType: string) =>
    t.request({
      method: "PUT",
      url: `/api/v1/workspaces/${id}/logo`,
      headers: { ...bearer(key), "content-type": contentType },
      payload: bytes,
    });

  it("takes the image as the body, typed by its bytes, and the payment page serves it", async () => {
    // A WebP sent as image/png is kept as what its bytes are.
    const res = await put(ws.id, ws.testKey, WEBP, "image/png");
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toEqual({
      logo: {
        contentType: "image/webp",
        sha256: createHash("sha256").update(WEBP).digest("hex"),
        bytes: WEBP.length,
      },
    });
    const id = await payment(ws.testKey);
    const served = await t.request({ method: "GET", url: `/pay/${id}/logo` });
    expect(served.headers["content-type"]).toBe("image/webp");
    expect(Buffer.compare(served.rawPayload, WEBP)).toBe(0);

    const removed = await t.request({
      method: "DELETE",
      url: `/api/v1/workspaces/${ws.id}/logo`,
      headers: bearer(ws.liveKey),
    });
    expect(removed.statusCode, removed.body).toBe(200);
    expect(removed.json()).toEqual({ success: true });
    expect((await t.request({ method: "GET", url: `/pay/${id}/logo` })).statusCode).toBe(404);
  });

  it("refuses what is no PNG, JPEG or WebP, a JSON body, too large a one, and another's key, with JSON errors", async () => {
    const svg = await put(ws.id, ws.testKey, SVG, "image/png");
    expect(svg.statusCode).toBe(400);
    expect(svg.json().error).toMatch(/PNG, JPEG or WebP/);

    const json = await t.request({
      method: "PUT",
      url: `/api/v1/workspaces/${ws.id}/logo`,
      headers: bearer(ws.testKey),
      payload: { logo: "data:image/png;base64,AAAA" },
    });
    expect(json.statusCode).toBe(400);
    expect(json.json().error).toMatch(/Content-Type image\/png, image\/jpeg or image\/webp/);

    const gif = await put(ws.id, ws.testKey, GIF, "image/gif");
    expect(gif.statusCode).toBe(415);
    expect(gif.json()).toHaveProperty("error");

    const large = await put(ws.id, ws.testKey, Buffer.concat([PNG, Buffer.alloc(256 * 1024)]), "image/png");
    expect(large.statusCode).toBe(400);
    expect(large.json().error).toMatch(/256 KiB/);
    const huge = await put(ws.id, ws.testKey, Buffer.concat([PNG, Buffer.alloc(1024 * 1024)]), "image/png");
    expect(huge.statusCode).toBe(413);
    expect(huge.json()).toHaveProperty("error");

    const theirs = await put(ws.id, other.testKey, PNG, "image/png");
    expect(theirs.statusCode).toBeGreaterThanOrEqual(403);
    expect(theirs.statusCode).toBeLessThan(405);
    expect((await t.app.services.branding.logo(ws.id))?.sha256).not.toBe(
      createHash("sha256").update(PNG).digest("hex"),
    );
  });
});
