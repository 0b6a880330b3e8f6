import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  bearer,
  type CreatedWorkspace,
  createWorkspace,
  startTestApp,
  type TestApp,
} from "../support/app.ts";
import { ADMIN_PASSWORD, dashboardWorkspace, signedInAs } from "../support/dashboard.ts";

// The dashboard's splits page (D15) over HTTP (inject), on PGlite or the PostgreSQL of
// DATABASE_URL: the configuration form through SplitsService.put (all or nothing), and the
// settlements with their legs.

const PASSWORD = ADMIN_PASSWORD;
const PARTNER = "0xAbCdEf0123456789abcdef0123456789ABCDEF01";
const AGENT = "0x2222222222222222222222222222222222222222";
const SCRIPT_LABEL = "<script>alert(1)</script>";
let t: TestApp;
let ws: CreatedWorkspace;
let email: string;

beforeAll(async () => {
  t = await startTestApp();
  ({ ws, email } = await dashboardWorkspace(t, "splits", "Splits Co"));
});

afterAll(async () => {
  await t?.close();
});

const signedIn = (ip: string, who = email) => signedInAs(t, ip, who);

async function apiSplits(key: string) {
  const res = await t.request({ method: "GET", url: "/api/v1/splits", headers: bearer(key) });
  expect(res.statusCode, text(res)).toBe(200);
  return res.json() as {
    enabled: boolean;
    splits: Array<{ id: string; label: string; percentBps: number; destination: string; enabled: boolean }>;
  };
}

/**
 * The form as a browser sends it: `rows` rows, each given as [label, percent, destination,
 * enabled], and the current password (the step-up) unless `extra` says otherwise.
 */
function form(
  csrf: string,
  enabled: boolean,
  rows: Array<[string, string, string, boolean] | null>,
  extra: Record<string, string> = {},
): Record<string, string> {
  const body: Record<string, string> = {
    _csrf: csrf,
    rows: String(rows.length),
    currentPassword: PASSWORD,
    ...extra,
  };
  if (enabled) body.enabled = "on";
  rows.forEach((row, i) => {
    const [label, percent, destination, on] = row ?? ["", "", "", true];
    Object.assign(body, {
      [`label-${i}`]: label,
      [`percent-${i}`]: percent,
      [`destination-${i}`]: destination,
    });
    if (on) body[`enabled-${i}`] = "on";
  });
  return body;
}

const SAVED: Array<[string, string, string, boolean]> = [
  ["Partner", "12.5", PARTNER, true],
  [SCRIPT_LABEL, "0.01", AGENT, true],
  ["Paused agent", "5", AGENT, false],
];

describe("the splits page", () => {
  it("shows empty states and the page in the navigation before anything is configured", async () => {
    const browser = await signedIn("198.51.100.61");
    const res = await browser.get("/dashboard/sandbox/splits");
    expect(res.statusCode).toBe(200);
    expect(text(res)).toMatch(/<a href="\/dashboard\/sandbox\/splits" aria-current="page">Splits<\/a>/);
    expect(text(res)).toContain("No splits configured yet.");
    expect(text(res)).toContain("No settlements in sandbox yet.");
    expect(text(res)).toContain("Splits are off");
    // Three blank rows, each field labelled.
    expect(text(res)).toContain('name="rows" value="3"');
    for (const f of ["label", "percent", "destination"])
      expect(text(res)).toContain(`<label for="split-2-${f}">`);
    expect(text(res)).not.toContain('id="split-3-label"');
  });

  it("saves a configuration, percent converted exactly to basis points, blank rows ignored", async () => {
    const browser = await signedIn("198.51.100.62");
    const csrf = await browser.csrf("/dashboard/sandbox/splits");
    const saved = await browser.post(
      "/dashboard/sandbox/splits",
      form(csrf, true, [SAVED[0] ?? null, null, ...SAVED.slice(1)]),
    );
    expect(saved.statusCode, saved.body.slice(0, 600)).toBe(303);
    expect(saved.headers.location).toBe("/dashboard/sandbox/splits?notice=splits-saved");
    const api = await apiSplits(ws.testKey);
    expect(api.enabled).toBe(true);
    expect(api.splits.map((s) => [s.label, s.percentBps, s.destination, s.enabled])).toEqual([
      ["Partner", 1250, PARTNER.toLowerCase(), true],
      [SCRIPT_LABEL, 1, AGENT, true],
      ["Paused agent", 500, AGENT, false],
    ]);
    // Live has its own configuration.
    expect((await apiSplits(ws.liveKey)).splits).toEqual([]);

    const page = await browser.get(saved.headers.location ?? "");
    expect(text(page)).toContain("Splits saved.");
    expect(text(page)).toContain('id="splits-enabled" checked');
    expect(text(page)).toMatch(/<strong>12\.51%<\/strong>/);
    expect(text(page)).toContain('id="split-0-percent" name="percent-0" inputmode="decimal"');
    expect(text(page)).toMatch(/name="percent-0"[^>]*value="12\.5"/);
    expect(text(page)).toMatch(/name="percent-1"[^>]*value="0\.01"/);
    expect(text(page)).toContain(`value="${"&lt;script&gt;alert(1)&lt;/script&gt;"}"`);
    expect(text(page)).not.toContain("<script>alert");
    // The three configured rows and three blank ones.
    expect(text(page)).toContain('name="rows" value="6"');
  });

  it("keeps the typed values next to the service's message and changes nothing when refused", async () => {
    const browser = await signedIn("198.51.100.63");
    const csrf = await browser.csrf("/dashboard/sandbox/splits");
    const before = await apiSplits(ws.testKey);

    // Row 3 (the second split sent: row 2 is blank) has a bad address.
    const bad = await browser.post(
      "/dashboard/sandbox/splits",
      form(csrf, true, [["Partner", "20", PARTNER, true], null, ["New <b>", "7.25", "0x123<i>", true]]),
    );
    expect(bad.statusCode).toBe(400);
    expect(text(bad)).toContain(
      'id="split-2-error" role="alert">Split 3: splits[1].destination must be an address: 0x and 40 hex digits',
    );
    expect(text(bad)).toMatch(/id="split-2-destination"[^>]*value="0x123&lt;i&gt;" aria-invalid="true"/);
    expect(text(bad)).toMatch(/name="label-2"[^>]*value="New &lt;b&gt;"/);
    expect(text(bad)).toMatch(/name="percent-0"[^>]*value="20"/);
    expect(text(bad)).toContain('name="rows" value="3"');

    // Over 100% together: the message above the rows.
    const over = await browser.post(
      "/dashboard/sandbox/splits",
      form(csrf, true, [
        ["A", "60", PARTNER, true],
        ["B", "40.01", AGENT, true],
      ]),
    );
    expect(over.statusCode).toBe(400);
    expect(text(over)).toContain(
      `id="splits-error" role="alert">splits: the enabled splits&#39; percentBps sum to 10001, more than 10000`,
    );

    // A percent with 3 decimals is refused by the page itself; a duplicate label by the service.
    const decimals = await browser.post(
      "/dashboard/sandbox/splits",
      form(csrf, true, [["A", "12.345", PARTNER, true]]),
    );
    expect(decimals.statusCode).toBe(400);
    expect(text(decimals)).toContain("Split 1: the percent must be a number from 0.01 to 100");
    expect(text(decimals)).toMatch(/name="percent-0"[^>]*value="12\.345" aria-invalid="true"/);
    const twice = await browser.post(
      "/dashboard/sandbox/splits",
      form(csrf, false, [
        ["A", "1", PARTNER, true],
        ["A", "2", AGENT, true],
      ]),
    );
    expect(twice.statusCode).toBe(400);
    expect(text(twice)).toContain("Split 2: splits[1].label must be unique: &quot;A&quot; is used twice");
    expect(text(twice)).not.toContain('id="splits-enabled" checked');

    expect(await apiSplits(ws.testKey)).toEqual(before);
  });

  it("refuses a form without the session's CSRF token, and changes nothing", async () => {
    const browser = await signedIn("198.51.100.64");
    const before = await apiSplits(ws.testKey);
    const missing = await browser.post("/dashboard/sandbox/splits", form("", false, []));
    expect(missing.statusCode).toBe(403);
    const body = form("", false, []);
    delete body._csrf;
    expect((await browser.post("/dashboard/sandbox/splits", body)).statusCode).toBe(403);
    const wrong = await browser.post("/dashboard/sandbox/splits", form("x".repeat(32), false, []));
    expect(wrong.statusCode).toBe(403);
    expect(await apiSplits(ws.testKey)).toEqual(before);
  });

  it("shows a sandbox payment's settlement with each leg's exact amount, linked from the payment", async () => {
    const created = await t.request({
      method: "POST",
      url: "/api/v1/payments",
      headers: bearer(ws.testKey),
      payload: { amount: "100.00", tokenSymbol: "USDC", paymentMethod: "crypto" },
    });
    expect(created.statusCode, text(created)).toBe(201);
    const paymentId = created.json().payment.id as string;
    const api = await t.request({
      method: "GET",
      url: `/api/v1/settlements?paymentId=${paymentId}`,
      headers: bearer(ws.testKey),
    });
    const settlement = api.json().settlements[0];
    expect(settlement.merchantAmount).toBe("86.17765");

    const browser = await signedIn("198.51.100.65");
    const page = await browser.get("/dashboard/sandbox/splits");
    expect(page.statusCode).toBe(200);
    const card = cardOf(text(page), settlement.settlementId);
    expect(card).toContain(`href="/dashboard/sandbox/payments/${paymentId}"`);
    // net 98.50 after the 1.5% fee; 12.5% and 0.01% of it; the merchant the rest (D4 amounts).
    expect(card).toMatch(
      /<th scope="row">Merchant<\/th><td class="num"><span class="amount">86\.17765&nbsp;USDC/,
    );
    expect(card).toMatch(/<th scope="row">Fee<\/th><td class="num"><span class="amount">1\.50&nbsp;USDC/);
    expect(card).toContain('net <span class="amount">98.50&nbsp;USDC</span>');
    const partner = legOf(card, "Partner");
    expect(partner).toContain("(12.5%)");
    expect(partner).toContain("12.3125&nbsp;USDC");
    expect(partner).toContain(`data-copy="${PARTNER.toLowerCase()}"`);
    expect(partner).toContain('status-sent">sent');
    const tx = settlement.splits[0].txRef as string;
    // Its transaction (a link once the environment's network names an explorer: see split-form.test.ts).
    expect(partner).toContain(`data-copy="${tx}"`);
    const script = legOf(card, "&lt;script&gt;alert(1)&lt;/script&gt;");
    expect(script).toContain("(0.01%)");
    expect(script).toContain("0.00985&nbsp;USDC");
    // The disabled split is no leg, and nothing a merchant typed became markup.
    expect(card).not.toContain("Paused agent");
    expect(text(page)).not.toContain("<script>alert");

    // The payment's page shows the same legs and leads to this settlement.
    const detail = await browser.get(`/dashboard/sandbox/payments/${paymentId}`);
    expect(text(detail)).toContain('id="payment-settlement"');
    expect(text(detail)).toContain("12.3125&nbsp;USDC");
    const link = `/dashboard/sandbox/splits?payment=${paymentId}#settlements-title`;
    expect(text(detail)).toContain(`href="${link}"`);
    const narrowed = await browser.get(link.split("#")[0] ?? "");
    expect(text(narrowed)).toContain("Settlements 1–1 of 1");
    expect(text(narrowed)).toContain(`data-settlement-id="${settlement.settlementId}"`);

    // A payment keeps the configuration of its creation: replacing it changes no recorded leg.
    const csrf = await browser.csrf("/dashboard/sandbox/splits");
    const replaced = await browser.post("/dashboard/sandbox/splits", form(csrf, false, []));
    expect(replaced.statusCode).toBe(303);
    const after = await browser.get("/dashboard/sandbox/splits");
    expect(text(after)).toContain("Splits are off");
    expect(legOf(cardOf(text(after), settlement.settlementId), "Partner")).toContain("12.3125&nbsp;USDC");
  });

  it("pages the settlements, newest first", async () => {
    const second = await t.request({
      method: "POST",
      url: "/api/v1/payments",
      headers: bearer(ws.testKey),
      payload: { amount: "2.00", tokenSymbol: "USDC", paymentMethod: "crypto" },
    });
    expect(second.statusCode).toBe(201);
    const browser = await signedIn("198.51.100.66");
    const first = await browser.get("/dashboard/sandbox/splits");
    expect(text(first)).toContain("Settlements 1–2 of 2, newest first.");
    const older = await browser.get("/dashboard/sandbox/splits?offset=1");
    expect(text(older)).toContain("Settlements 2–2 of 2");
    expect(text(older)).toContain(
      'id="newer-settlements" href="/dashboard/sandbox/splits?offset=0#settlements-title"',
    );
    expect(text(older)).toContain("86.17765&nbsp;USDC");
    const beyond = await browser.get("/dashboard/sandbox/splits?offset=50");
    expect(text(beyond)).toContain("No settlements on this page.");
    expect((await browser.get("/dashboard/staging/splits")).statusCode).toBe(404);
  });

  it("never shows one workspace's splits or settlements to another's session", async () => {
    const otherEmail = `other-splits-${Math.random().toString(36).slice(2, 8)}@shop.example`;
    const other = await createWorkspace(t, {
      name: "Other Co",
      adminEmail: otherEmail,
      adminPassword: PASSWORD,
    });
    const mine = await signedIn("198.51.100.67");
    const csrf = await mine.csrf("/dashboard/sandbox/splits");
    expect(
      (await mine.post("/dashboard/sandbox/splits", form(csrf, true, [["Mine only", "3", PARTNER, true]])))
        .statusCode,
    ).toBe(303);
    const theirs = await signedIn("198.51.100.68", otherEmail);
    const page = await theirs.get("/dashboard/sandbox/splits");
    expect(page.statusCode).toBe(200);
    expect(text(page)).not.toContain("Mine only");
    expect(text(page)).not.toContain("Partner");
    expect(text(page)).toContain("No settlements in sandbox yet.");
    const api = await apiSplits(ws.testKey);
    const paymentId = (
      await t.request({ method: "GET", url: "/api/v1/settlements", headers: bearer(ws.testKey) })
    ).json().settlements[0].paymentIds[0] as string;
    const narrowed = await theirs.get(`/dashboard/sandbox/splits?payment=${paymentId}`);
    expect(text(narrowed)).toContain("This payment has no settlement (yet).");
    // Their save is theirs: ours is unchanged.
    const theirCsrf = await theirs.csrf("/dashboard/sandbox/splits");
    expect((await theirs.post("/dashboard/sandbox/splits", form(theirCsrf, false, []))).statusCode).toBe(303);
    expect(await apiSplits(ws.testKey)).toEqual(api);
    expect((await apiSplits(other.testKey)).splits).toEqual([]);
  });
});

/** A page's HTML with the entities of "/" and "=" read back (the other escapes stay). */
function text(res: { body: string }): string {
  return res.body.replaceAll("&#x2F;", "/").replaceAll("&#x3D;", "=");
}

/** The settlement's card on the page. */
function cardOf(body: string, settlementId: string): string {
  const start = body.indexOf(`data-settlement-id="${settlementId}"`);
  expect(start, "the settlement is on the page").toBeGreaterThan(-1);
  return body.slice(start, body.indexOf("</article>", start));
}

/** A split's row of a legs table, by its (escaped) label. */
function legOf(card: string, label: string): string {
  const start = card.indexOf(`<th scope="row">${label} `);
  expect(start, `a leg ${label}`).toBeGreaterThan(-1);
  return card.slice(start, card.indexOf("</tr>", start));
}
