import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  bearer,
  type CreatedWorkspace,
  createWorkspace,
  sandboxPayment,
  startTestApp,
  type TestApp,
} from "../support/app.ts";

// What the payment page and its receipt share over HTTP: the language (?lang= over
// Accept-Language), a fresh script nonce per response, the page's headers, and the not-found page.

let t: TestApp;
let ws: CreatedWorkspace;
const UNKNOWN = "00000000-0000-4000-8000-000000000000";

beforeAll(async () => {
  t = await startTestApp({ RATE_LIMIT_SANDBOX: "100000" });
  ws = await createWorkspace(t, { name: "Routes Co" });
});

afterAll(async () => {
  await t?.close();
});

const pending = () => sandboxPayment(t, ws.testKey, { amount: "2.00", pending: true });

async function get(url: string, acceptLanguage = "de") {
  const res = await t.request({ method: "GET", url, headers: { "accept-language": acceptLanguage } });
  const csp = String(res.headers["content-security-policy"] ?? "");
  return { res, nonce: /'nonce-([^']+)'/.exec(csp)?.[1] };
}

function expectPageHeaders(res: Awaited<ReturnType<typeof get>>["res"], url: string) {
  expect(res.headers["content-type"], url).toBe("text/html; charset=utf-8");
  expect(res.headers["cache-control"], url).toBe("no-store");
  expect(res.headers.vary, url).toMatch(/accept-language/i);
  expect(res.headers["x-frame-options"], url).toBe("DENY");
}

describe("GET /pay/:id and /pay/:id/receipt", () => {
  it.each(["", "/receipt"])(
    "an unknown payment%s: the not-found page in the payer's language",
    async (tail) => {
      const url = `/pay/${UNKNOWN}${tail}`;
      const { res } = await get(url);
      expect(res.statusCode).toBe(404);
      expectPageHeaders(res, url);
      expect(res.body).toContain('<html lang="de">');
      expect(res.body).toContain("<h1>Zahlung nicht gefunden</h1>");
    },
  );

  it("a pending payment: its page, ?lang= winning over Accept-Language, a fresh nonce on its script", async () => {
    const id = await pending();
    const first = await get(`/pay/${id}?lang=fr`);
    const again = await get(`/pay/${id}`);
    expect(first.res.statusCode).toBe(200);
    expectPageHeaders(first.res, "page");
    expect(first.res.body).toContain('<html lang="fr">');
    expect(again.res.body).toContain('<html lang="de">');
    expect(first.nonce).toBeTruthy();
    expect(first.res.body).toContain(`<script nonce="${first.nonce}" src="/pay/assets/page.js"`);
    expect(again.nonce).not.toBe(first.nonce);
  });

  it("its receipt before payment: the page saying there is none yet, in the same language and headers", async () => {
    const id = await pending();
    const { res, nonce } = await get(`/pay/${id}/receipt?lang=es`);
    expect(res.statusCode).toBe(404);
    expectPageHeaders(res, "receipt");
    expect(res.body).toContain('<main id="no-receipt"><h1>Recibo</h1>');
    expect(res.body).toContain(`href="/pay/${id}?lang=es"`);
    expect(res.body).toContain(`<script nonce="${nonce}" src="/pay/assets/page.js"`);
  });

  it("a sandbox payment paid as it was created has a receipt, timed at its creation, with no hash", async () => {
    const res = await t.request({
      method: "POST",
      url: "/api/v1/payments",
      headers: bearer(ws.testKey),
      payload: { amount: "2.50", tokenSymbol: "USDC", paymentMethod: "crypto" },
    });
    expect(res.statusCode, res.body).toBe(201);
    const payment = res.json().payment;
    expect(payment.status).toBe("forwarded");
    const { res: receipt } = await get(`/pay/${payment.id}/receipt?lang=en`);
    expect(receipt.statusCode).toBe(200);
    expectPageHeaders(receipt, "receipt");
    expect(/<time datetime="([^"]+)"/.exec(receipt.body)?.[1]).toBe(
      new Date(payment.createdAt).toISOString(),
    );
    expect(receipt.body).not.toContain("data-tx-hash");
  });
});
