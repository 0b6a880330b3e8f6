import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type CreatedWorkspace, sandboxPayment, startTestApp, type TestApp } from "../support/app.ts";
import { type DashboardClient, dashboardWorkspace, signedInAs } from "../support/dashboard.ts";

// The settings page's checkout branding (D25): display name and brand colour saved and cleared,
// a logo uploaded as multipart/form-data (kept by its magic bytes, at most 256 KiB), previewed,
// replaced and removed, each seen on the hosted page of the workspace's payments and never on
// another workspace's; bad input comes back as the form with the field's message.

let t: TestApp;
let ws: CreatedWorkspace;
let browser: DashboardClient;
let other: { ws: CreatedWorkspace; browser: DashboardClient };
let paymentId: string;
let otherPaymentId: string;

const PNG = Buffer.concat([
  Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
  Buffer.from("a small png body"),
]);
const WEBP = Buffer.concat([Buffer.from("RIFF"), Buffer.from([9, 0, 0, 0]), Buffer.from("WEBPVP8 body")]);
const SVG = Buffer.from('<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>');

const payment = (key: string) => sandboxPayment(t, key);

const hostedPage = async (id: string) => (await t.request({ method: "GET", url: `/pay/${id}` })).body;
const logoOf = (id: string) => t.request({ method: "GET", url: `/pay/${id}/logo` });

beforeAll(async () => {
  t = await startTestApp({ RATE_LIMIT_SANDBOX: "100000" });
  const mine = await dashboardWorkspace(t, "brand", "Brand Works");
  ws = mine.ws;
  browser = await signedInAs(t, "198.51.100.61", mine.email);
  const theirs = await dashboardWorkspace(t, "brand-other", "Other Works");
  other = { ws: theirs.ws, browser: await signedInAs(t, "198.51.100.62", theirs.email) };
  paymentId = await payment(ws.testKey);
  otherPaymentId = await payment(other.ws.testKey);
});

afterAll(async () => {
  await t?.close();
});

describe("display name and brand colour", () => {
  it("the settings page shows the form, saves both, and the hosted page shows them", async () => {
    const page = await browser.get("/dashboard/sandbox/settings");
    expect(page.statusCode).toBe(200);
    expect(page.body).toContain('id="branding-title"');
    expect(page.body).toContain('placeholder="Brand Works"');
    expect(page.body).toContain('id="no-logo"');
    expect(await hostedPage(paymentId)).toContain("Brand Works");

    const csrf = await browser.csrf("/dashboard/sandbox/settings");
    const saved = await browser.post("/dashboard/sandbox/settings/branding", {
      _csrf: csrf,
      displayName: "  Blue Mug Shop ",
      brandColor: "#A1B2C3",
    });
    expect(saved.statusCode, saved.body.slice(0, 300)).toBe(303);
    expect(saved.headers.location).toBe("/dashboard/sandbox/settings?notice=branding-saved");
    const after = await browser.get("/dashboard/sandbox/settings?notice=branding-saved");
    expect(after.body).toContain("Checkout branding saved.");
    expect(after.body).toContain('value="Blue Mug Shop"');
    expect(after.body).toContain('value="#a1b2c3"');

    const hosted = await hostedPage(paymentId);
    expect(hosted).toContain("Blue Mug Shop");
    expect(hosted).toContain("#a1b2c3");
    // Another workspace's page is not touched.
    const theirs = await hostedPage(otherPaymentId);
    expect(theirs).not.toContain("Blue Mug Shop");
    expect(theirs).not.toContain("#a1b2c3");
  });

  it("a bad colour or name comes back as the form (400) naming the field, and nothing is saved", async () => {
    const csrf = await browser.csrf("/dashboard/sandbox/settings");
    const colour = await browser.post("/dashboard/sandbox/settings/branding", {
      _csrf: csrf,
      displayName: "Typed Name",
      brandColor: "blue",
    });
    expect(colour.statusCode).toBe(400);
    expect(colour.body).toContain('id="brandColor-error"');
    expect(colour.body).toContain("brandColor must be a colour written #rrggbb");
    expect(colour.body).toContain('value="Typed Name"'); // what was typed is kept
    expect(colour.body).toMatch(/id="brandColor"[^>]*aria-invalid="true"/);

    const name = await browser.post("/dashboard/sandbox/settings/branding", {
      _csrf: csrf,
      displayName: "x".repeat(81),
      brandColor: "",
    });
    expect(name.statusCode).toBe(400);
    expect(name.body).toContain('id="displayName-error"');
    expect(name.body).toContain("displayName must be 1 to 80 characters");

    expect(await hostedPage(paymentId)).toContain("Blue Mug Shop");
  });

  it("emptied fields clear both: the page shows the workspace's name and its own colours", async () => {
    const csrf = await browser.csrf("/dashboard/sandbox/settings");
    const res = await browser.post("/dashboard/sandbox/settings/branding", {
      _csrf: csrf,
      displayName: " ",
      brandColor: "",
    });
    expect(res.statusCode).toBe(303);
    const hosted = await hostedPage(paymentId);
    expect(hosted).not.toContain("Blue Mug Shop");
    expect(hosted).not.toContain("#a1b2c3");
    expect(hosted).toContain("Brand Works");
  });

  it("a form without the session's CSRF token is refused (403) and changes nothing", async () => {
    const res = await browser.post("/dashboard/sandbox/settings/branding", {
      _csrf: "forged",
      displayName: "Forged",
      brandColor: "",
    });
    expect(res.statusCode).toBe(403);
    expect(await hostedPage(paymentId)).not.toContain("Forged");
  });
});

describe("the logo", () => {
  it("uploaded as multipart, previewed on the settings page and shown on this workspace's payments only", async () => {
    const csrf = await browser.csrf("/dashboard/sandbox/settings");
    const res = await browser.postMultipart(
      "/dashboard/sandbox/settings/logo",
      { _csrf: csrf },
      { name: "logo", filename: "logo.png", type: "image/png", bytes: PNG },
    );
    expect(res.statusCode, res.body.slice(0, 300)).toBe(303);
    expect(res.headers.location).toBe("/dashboard/sandbox/settings?notice=logo-saved");

    const settings = await browser.get("/dashboard/sandbox/settings");
    const preview = /<img class="logo-preview" src="([^"]+)"/
      .exec(settings.body)?.[1]
      ?.replaceAll("&#x2F;", "/");
    expect(preview).toMatch(/^\/dashboard\/sandbox\/settings\/logo\?v=[0-9a-f]{16}$/);
    const previewed = await browser.get(preview ?? "");
    expect(previewed.statusCode).toBe(200);
    expect(previewed.headers["content-type"]).toBe("image/png");
    expect(previewed.headers["cache-control"]).toBe("private, max-age=300");
    expect(previewed.rawPayload.equals(PNG)).toBe(true);

    const served = await logoOf(paymentId);
    expect(served.statusCode).toBe(200);
    expect(served.headers["content-type"]).toBe("image/png");
    expect(served.rawPayload.equals(PNG)).toBe(true);
    expect(await hostedPage(paymentId)).toContain(`/pay/${paymentId}/logo?v=`);

    expect((await logoOf(otherPaymentId)).statusCode).toBe(404);
    const theirSettings = await other.browser.get("/dashboard/sandbox/settings");
    expect(theirSettings.body).toContain('id="no-logo"');
    expect((await other.browser.get("/dashboard/sandbox/settings/logo")).statusCode).toBe(404);
  });

  it("is replaced by the next upload, whatever name or type the browser gives it", async () => {
    const csrf = await browser.csrf("/dashboard/sandbox/settings");
    const res = await browser.postMultipart(
      "/dashboard/sandbox/settings/logo",
      { _csrf: csrf },
      { name: "logo", filename: "logo.txt", type: "text/plain", bytes: WEBP },
    );
    expect(res.statusCode, res.body.slice(0, 300)).toBe(303);
    const served = await logoOf(paymentId);
    expect(served.headers["content-type"]).toBe("image/webp");
    expect(served.rawPayload.equals(WEBP)).toBe(true);
  });

  it("an SVG, an empty file, no file and a file over 256 KiB are each refused on the form (400)", async () => {
    const csrf = await browser.csrf("/dashboard/sandbox/settings");
    const cases: [string, { name: string; filename: string; type: string; bytes: Uint8Array } | undefined][] =
      [
        [
          "The logo must be a PNG, JPEG or WebP image",
          { name: "logo", filename: "logo.svg", type: "image/svg+xml", bytes: SVG },
        ],
        [
          "The logo is empty",
          { name: "logo", filename: "", type: "application/octet-stream", bytes: new Uint8Array() },
        ],
        ["Choose a PNG, JPEG or WebP image to upload", undefined],
        [
          "The logo is larger than 256 KiB",
          {
            name: "logo",
            filename: "big.png",
            type: "image/png",
            bytes: Buffer.concat([PNG, Buffer.alloc(256 * 1024 - PNG.length + 1)]),
          },
        ],
      ];
    for (const [message, file] of cases) {
      const res = await browser.postMultipart("/dashboard/sandbox/settings/logo", { _csrf: csrf }, file);
      expect(res.statusCode, message).toBe(400);
      expect(res.body, message).toContain('id="logo-error"');
      expect(res.body, message).toContain(message);
    }
    // The last good logo is still the one served.
    expect((await logoOf(paymentId)).rawPayload.equals(WEBP)).toBe(true);
  });

  it("exactly 256 KiB is kept", async () => {
    const csrf = await browser.csrf("/dashboard/sandbox/settings");
    const bytes = Buffer.concat([PNG, Buffer.alloc(256 * 1024 - PNG.length)]);
    const res = await browser.postMultipart(
      "/dashboard/sandbox/settings/logo",
      { _csrf: csrf },
      { name: "logo", filename: "max.png", type: "image/png", bytes },
    );
    expect(res.statusCode, res.body.slice(0, 300)).toBe(303);
    expect((await logoOf(paymentId)).rawPayload.length).toBe(256 * 1024);
  });

  it("an upload without the session's CSRF token is refused (403)", async () => {
    const res = await browser.postMultipart(
      "/dashboard/sandbox/settings/logo",
      { _csrf: "forged" },
      { name: "logo", filename: "logo.png", type: "image/png", bytes: PNG },
    );
    expect(res.statusCode).toBe(403);
    expect((await logoOf(paymentId)).rawPayload.length).toBe(256 * 1024);
  });

  it("Remove logo removes it: the hosted page shows the name alone", async () => {
    const csrf = await browser.csrf("/dashboard/sandbox/settings");
    expect((await browser.get("/dashboard/sandbox/settings")).body).toContain('id="remove-logo"');
    const res = await browser.post("/dashboard/sandbox/settings/logo/remove", { _csrf: csrf });
    expect(res.statusCode).toBe(303);
    expect(res.headers.location).toBe("/dashboard/sandbox/settings?notice=logo-removed");
    expect((await logoOf(paymentId)).statusCode).toBe(404);
    expect(await hostedPage(paymentId)).not.toContain("/logo?v=");
    expect((await browser.get("/dashboard/sandbox/settings")).body).toContain('id="no-logo"');
  });

  it("signed out, an upload goes to the login page and keeps nothing", async () => {
    const res = await t.request({
      method: "POST",
      url: "/dashboard/sandbox/settings/logo",
      headers: { "content-type": "multipart/form-data; boundary=x" },
      payload:
        '--x\r\nContent-Disposition: form-data; name="logo"; filename="a.png"\r\nContent-Type: image/png\r\n\r\n\x89PNG\r\n--x--\r\n',
    });
    expect(res.statusCode).toBe(303);
    expect(res.headers.location).toBe("/dashboard/login");
    expect((await logoOf(paymentId)).statusCode).toBe(404);
  });
});
