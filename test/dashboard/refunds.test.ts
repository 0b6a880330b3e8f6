import { randomUUID } from "node:crypto";
import type { LightMyRequestResponse } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  bearer,
  type CreatedWorkspace,
  createWorkspace,
  startTestApp,
  type TestApp,
} from "../support/app.ts";
import {
  ADMIN_PASSWORD,
  DashboardClient,
  dashboardWorkspace,
  formToken,
  signedInAs,
} from "../support/dashboard.ts";
import { hidden, pendingPayment, rowOf, sectionOf, text } from "../support/refund-pages.ts";

// The dashboard's refunds and unmatched-inbox actions (D19) over HTTP (inject), on PGlite or the
// PostgreSQL of DATABASE_URL: a payment's refund form through RefundsService.create (a form sent
// twice refunds once), and an open unmatched transfer's attach and return, each refusal shown
// next to its form and every other workspace's payment or transfer a 404.

const PASSWORD = ADMIN_PASSWORD;
const PAYER = "0x3333333333333333333333333333333333333333";
const OTHER_PAYER = "0x4444444444444444444444444444444444444444";
const ZERO = `0x${"0".repeat(40)}`;
let t: TestApp;
let ws: CreatedWorkspace;
let email: string;

beforeAll(async () => {
  t = await startTestApp({ RATE_LIMIT_SANDBOX: "100000" });
  ({ ws, email } = await dashboardWorkspace(t, "refunds", "Refunds Co"));
  await api(ws.testKey, "POST", "/api/v1/sandbox/faucet", { tokenSymbol: "USDC", amount: "500.00" }, 200);
});

afterAll(async () => {
  await t?.close();
});

async function api(key: string, method: "GET" | "POST", url: string, payload?: object, status?: number) {
  const res = await t.request({ method, url, headers: bearer(key), ...(payload ? { payload } : {}) });
  if (status !== undefined) expect(res.statusCode, res.body).toBe(status);
  return res.json();
}

const signedIn = (ip: string, who = email) => signedInAs(t, ip, who);

/** A payer's transfer to the workspace wallet: it lands in the inbox, open (D19). */
async function incomingTransfer(key: string, amount: string): Promise<{ id: string; from: string }> {
  const body = { tokenSymbol: "USDC", amount };
  return (await api(key, "POST", "/api/v1/sandbox/incoming-transfer", body, 201)).transfer;
}

/** The inbox through the API: each transfer's status. */
async function inbox(key: string): Promise<Map<string, string>> {
  const listed: { transfers: Array<{ id: string; status: string }> } = await api(
    key,
    "GET",
    "/api/v1/transfers/unmatched",
    undefined,
    200,
  );
  return new Map(listed.transfers.map((x) => [x.id, x.status]));
}

async function sandboxPayment(key: string, amount = "100.00"): Promise<string> {
  const created = await api(key, "POST", "/api/v1/payments", {
    amount,
    tokenSymbol: "USDC",
    paymentMethod: "crypto",
  });
  expect(created.payment.status).toBe("forwarded");
  return created.payment.id;
}

interface Refunds {
  refunds: Array<{ id: string; amount: string; status: string; destinationAddress: string; reason: string }>;
  total: number;
}

async function refundsOf(key: string, paymentId: string): Promise<Refunds> {
  return api(key, "GET", `/api/v1/payments/${paymentId}/refunds`, undefined, 200);
}

async function paymentOf(
  key: string,
  paymentId: string,
): Promise<{ refundedAmount: string; amountReceived: string | null; status: string }> {
  return (await api(key, "GET", `/api/v1/payments/${paymentId}`, undefined, 200)).payment;
}

/** Opens the payment's page and sends its refund form with `fields`. */
async function sendRefund(browser: DashboardClient, paymentId: string, fields: Record<string, string>) {
  return browser.post(refundsUrl(paymentId), await refundForm(browser, paymentId, fields));
}

const refundsUrl = (paymentId: string) => `/dashboard/sandbox/payments/${paymentId}/refunds`;

/** The refund form of a payment's page, as the browser would send it. */
async function refundForm(browser: DashboardClient, paymentId: string, fields: Record<string, string>) {
  const page = await browser.get(`/dashboard/sandbox/payments/${paymentId}`);
  expect(page.statusCode).toBe(200);
  const form = sectionOf(text(page), 'id="refund-form"', "</form>");
  return { _csrf: formToken(page.body), formToken: hidden(form, "formToken"), ...fields };
}

describe("the refund form of a payment's page", () => {
  it("refunds part of a forwarded payment, shown on the page and through the API", async () => {
    const paymentId = await sandboxPayment(ws.testKey);
    const browser = await signedIn("198.51.100.81");
    const page = await browser.get(`/dashboard/sandbox/payments/${paymentId}`);
    expect(text(page)).toContain('id="refunded-amount"><span class="amount">0.00&nbsp;USDC');
    expect(text(page)).toContain('<span id="refundable">100.00</span>');
    expect(text(page)).toContain("No refunds for this payment.");
    // No payer address on a sandbox payment: the destination is asked for.
    expect(text(page)).toContain("required: the payer's address is not known");

    const form = await refundForm(browser, paymentId, {
      amount: "10.00",
      destinationAddress: PAYER,
      walletType: "",
      reason: "Damaged <b>box</b>",
    });
    const sent = await browser.post(refundsUrl(paymentId), form);
    expect(sent.statusCode, sent.body.slice(0, 800)).toBe(303);
    const { refunds } = await refundsOf(ws.testKey, paymentId);
    expect(refunds).toHaveLength(1);
    expect(refunds[0]).toMatchObject({
      amount: "10.00",
      status: "completed",
      destinationAddress: PAYER,
      reason: "Damaged <b>box</b>",
    });
    expect(sent.headers.location).toBe(
      `/dashboard/sandbox/payments/${paymentId}?refund=${refunds[0]?.id}#refunds`,
    );
    expect((await paymentOf(ws.testKey, paymentId)).refundedAmount).toBe("10.00");

    const after = await browser.get(sent.headers.location ?? "");
    expect(after.statusCode).toBe(200);
    const section = sectionOf(text(after), 'id="refunds"', "</section>");
    expect(section).toContain(
      'id="refund-made" role="status">The refund of <span class="amount">10.00&nbsp;USDC</span> is complete.',
    );
    expect(section).toContain('id="refunded-amount"><span class="amount">10.00&nbsp;USDC');
    expect(section).toContain('<span id="refundable">90.00</span>');
    const row = sectionOf(section, `data-refund-id="${refunds[0]?.id}"`, "</tr>");
    expect(row).toContain("10.00&nbsp;USDC");
    expect(row).toContain('status-completed">completed');
    expect(row).toContain(`data-copy="${PAYER}"`);
    expect(row).toContain("Damaged &lt;b&gt;box&lt;/b&gt;");
    expect(text(after)).not.toContain("<b>box");
    // The facts show it too.
    expect(text(after)).toContain('<dt>Refunded</dt><dd><span class="amount">10.00&nbsp;USDC');
  });

  it("refunds once when the same form is sent twice, and everything left when the amount is empty", async () => {
    const paymentId = await sandboxPayment(ws.testKey, "40.00");
    const browser = await signedIn("198.51.100.82");
    const form = await refundForm(browser, paymentId, {
      amount: "15",
      destinationAddress: PAYER,
      reason: "",
    });
    const first = await browser.post(refundsUrl(paymentId), form);
    const second = await browser.post(refundsUrl(paymentId), form);
    expect(first.statusCode).toBe(303);
    expect(second.statusCode, second.body.slice(0, 800)).toBe(303);
    expect(second.headers.location).toBe(first.headers.location);
    expect((await refundsOf(ws.testKey, paymentId)).total).toBe(1);
    expect((await paymentOf(ws.testKey, paymentId)).refundedAmount).toBe("15.00");

    // A new form (a new token), amount left empty: the rest.
    const rest = await refundForm(browser, paymentId, { amount: "", destinationAddress: OTHER_PAYER });
    const sent = await browser.post(refundsUrl(paymentId), rest);
    expect(sent.statusCode, sent.body.slice(0, 800)).toBe(303);
    const listed = await refundsOf(ws.testKey, paymentId);
    expect(listed.refunds.map((r) => [r.amount, r.destinationAddress])).toEqual([
      ["15.00", PAYER],
      ["25.00", OTHER_PAYER],
    ]);
    expect((await paymentOf(ws.testKey, paymentId)).refundedAmount).toBe("40.00");
    const page = await browser.get(`/dashboard/sandbox/payments/${paymentId}`);
    expect(text(page)).toContain('id="fully-refunded"');
    expect(text(page)).not.toContain('id="refund-form"');
  });

  it("shows the service's refusal next to the form with the values as typed, and changes nothing", async () => {
    const paymentId = await sandboxPayment(ws.testKey, "20.00");
    const browser = await signedIn("198.51.100.83");
    const over = await sendRefund(browser, paymentId, {
      amount: "20.01",
      destinationAddress: PAYER,
      reason: "Too <much>",
    });
    expect(over.statusCode).toBe(400);
    expect(text(over)).toContain(
      'id="refund-amount-error" role="alert">Refund exceeds the refundable amount: at most 20.00 USDC is left to refund.',
    );
    expect(text(over)).toMatch(/id="refund-amount" name="amount"[^>]*value="20\.01" aria-invalid="true"/);
    expect(text(over)).toMatch(
      /name="destinationAddress"[^>]*value="0x3333333333333333333333333333333333333333"/,
    );
    expect(text(over)).toMatch(/name="reason"[^>]*value="Too &lt;much&gt;"/);

    // A sandbox payment has no payer address: without a destination it is refused.
    const nowhere = await sendRefund(browser, paymentId, { amount: "1", destinationAddress: "" });
    expect(nowhere.statusCode).toBe(400);
    expect(text(nowhere)).toContain(
      'id="refund-destinationAddress-error" role="alert">destinationAddress is required: the payment has no payerAddress to refund to',
    );
    // The zero address, through the API's own rule (issue 36).
    const burnt = await sendRefund(browser, paymentId, { amount: "1", destinationAddress: ZERO });
    expect(burnt.statusCode).toBe(400);
    expect(text(burnt)).toContain(
      'id="refund-destinationAddress-error" role="alert">destinationAddress must not be the zero address',
    );
    const malformed = await sendRefund(browser, paymentId, {
      amount: "1.0000001",
      destinationAddress: PAYER,
    });
    expect(malformed.statusCode).toBe(400);
    expect(text(malformed)).toContain(
      'id="refund-amount-error" role="alert">Amount must be a positive number',
    );

    // Without the one-time token the form is refused before anything is asked.
    const form = await refundForm(browser, paymentId, { amount: "1", destinationAddress: PAYER });
    const { formToken: _dropped, ...untokened } = form;
    const noToken = await browser.post(refundsUrl(paymentId), untokened);
    expect(noToken.statusCode).toBe(400);
    expect(text(noToken)).toContain('id="refund-error" role="alert">This form is incomplete');

    expect((await refundsOf(ws.testKey, paymentId)).total).toBe(0);
    expect((await paymentOf(ws.testKey, paymentId)).refundedAmount).toBe("0.00");
  });

  it("refuses a form without the session's CSRF token, and refunds nothing", async () => {
    const paymentId = await sandboxPayment(ws.testKey, "5.00");
    const browser = await signedIn("198.51.100.84");
    const form = await refundForm(browser, paymentId, { amount: "1", destinationAddress: PAYER });
    const url = refundsUrl(paymentId);
    expect((await browser.post(url, { ...form, _csrf: "" })).statusCode).toBe(403);
    expect((await browser.post(url, { ...form, _csrf: "x".repeat(32) })).statusCode).toBe(403);
    const { _csrf: _dropped, ...withoutCsrf } = form;
    expect((await browser.post(url, withoutCsrf)).statusCode).toBe(403);
    // Signed out: the login page.
    const stranger = new DashboardClient(t, "198.51.100.85");
    expect((await stranger.post(url, form)).statusCode).toBe(303);
    expect((await refundsOf(ws.testKey, paymentId)).total).toBe(0);
  });
});

describe("the unmatched inbox's actions", () => {
  it("returns a sandbox incoming transfer to its sender once, and the action goes away", async () => {
    const incoming = await incomingTransfer(ws.testKey, "7.25");
    const transferId = incoming.id;
    const browser = await signedIn("198.51.100.86");
    const page = await browser.get("/dashboard/sandbox/unmatched");
    expect(page.statusCode).toBe(200);
    const row = rowOf(text(page), transferId);
    expect(row).toContain('data-status="open"');
    expect(row).toContain("7.25&nbsp;USDC");
    expect(row).toContain(`action="/dashboard/sandbox/unmatched/${transferId}/attach"`);
    expect(row).toContain(`action="/dashboard/sandbox/unmatched/${transferId}/return"`);
    expect(row).toContain(`placeholder="${incoming.from}"`);

    const form = { _csrf: formToken(page.body), formToken: hidden(row, "formToken"), destinationAddress: "" };
    const url = `/dashboard/sandbox/unmatched/${transferId}/return`;
    // The zero address is refused with the API's message (issue 36), and nothing is returned.
    const burnt = await browser.post(url, { ...form, formToken: "z".repeat(24), destinationAddress: ZERO });
    expect(burnt.statusCode).toBe(400);
    expect(text(burnt)).toContain("destinationAddress must not be the zero address");
    expect((await inbox(ws.testKey)).get(transferId)).toBe("open");
    const returned = await browser.post(url, form);
    expect(returned.statusCode, returned.body.slice(0, 800)).toBe(303);
    expect(returned.headers.location).toBe("/dashboard/sandbox/unmatched?done=returned");
    // The same form again: the same return, not a second one.
    expect((await browser.post(url, form)).statusCode).toBe(303);

    expect((await inbox(ws.testKey)).get(transferId)).toBe("returned");

    const after = await browser.get(returned.headers.location ?? "");
    expect(text(after)).toContain('id="unmatched-done" role="status">The transfer is being sent back.');
    const done = rowOf(text(after), transferId);
    expect(done).toContain('data-status="returned"');
    expect(done).not.toContain("<form");

    // Returned already: a new form of the old page is refused with the service's message.
    const again = await browser.post(url, { ...form, formToken: "f".repeat(24) });
    expect(again.statusCode).toBe(409);
    expect(text(again)).toContain('id="unmatched-error" role="alert">Unmatched transfer is already returned');
  });

  it("keeps a transfer as the wallet's own money once, and its actions go away (issue 39)", async () => {
    const { id: transferId } = await incomingTransfer(ws.testKey, "2.50");
    const browser = await signedIn("198.51.100.87");
    const page = await browser.get("/dashboard/sandbox/unmatched");
    const url = `/dashboard/sandbox/unmatched/${transferId}/keep`;
    expect(rowOf(text(page), transferId)).toContain(`action="${url}"`);
    const form = { _csrf: formToken(page.body) };
    const kept = await browser.post(url, form);
    expect(kept.statusCode, kept.body.slice(0, 800)).toBe(303);
    expect(kept.headers.location).toBe("/dashboard/sandbox/unmatched?done=kept");
    // The same form again: it is kept, nothing else.
    expect((await browser.post(url, form)).statusCode).toBe(303);
    expect((await inbox(ws.testKey)).get(transferId)).toBe("kept");
    const after = await browser.get(kept.headers.location ?? "");
    expect(text(after)).toContain('id="unmatched-done" role="status">The transfer is kept as the wallet');
    const row = rowOf(text(after), transferId);
    expect(row).toContain('data-status="kept"');
    expect(row).not.toContain("<form");
    // A kept transfer cannot be returned any more.
    const back = `/dashboard/sandbox/unmatched/${transferId}/return`;
    const refused = await browser.post(back, { ...form, formToken: "k".repeat(24), destinationAddress: "" });
    expect(refused.statusCode).toBe(409);
    expect(text(refused)).toContain("Unmatched transfer is already kept");
  });

  it("shows a refused attach in the transfer's row, as typed", async () => {
    const incoming = await incomingTransfer(ws.testKey, "3.00");
    const transferId = incoming.id;
    const browser = await signedIn("198.51.100.87");
    const csrf = await browser.csrf("/dashboard/sandbox/unmatched");
    const url = `/dashboard/sandbox/unmatched/${transferId}/attach`;
    const unknown = randomUUID();
    const res = await browser.post(url, { _csrf: csrf, paymentId: unknown });
    expect(res.statusCode).toBe(404);
    const row = rowOf(text(res), transferId);
    expect(row).toContain(`id="unmatched-${transferId}-error" role="alert">Payment not found`);
    expect(row).toMatch(new RegExp(`id="attach-${transferId}"[^>]*value="${unknown}" aria-invalid="true"`));

    const empty = await browser.post(url, { _csrf: csrf, paymentId: " " });
    expect(empty.statusCode).toBe(400);
    expect(rowOf(text(empty), transferId)).toContain("paymentId is required");

    // A forwarded payment takes no transfer.
    const forwarded = await sandboxPayment(ws.testKey, "3.00");
    const refused = await browser.post(url, { _csrf: csrf, paymentId: forwarded });
    expect(refused.statusCode).toBe(400);
    expect(rowOf(text(refused), transferId)).toContain(
      "Only a pending or expired payment can take an unmatched transfer",
    );
    expect((await inbox(ws.testKey)).get(transferId)).toBe("open");
  });

  it("attaches a late transfer to its pending payment, recorded as what it received", async () => {
    // The amount asked: attaching an underpayment fails on the payments' gross = fee + net CHECK
    // (the inbox recomputes fee and net on what was received but keeps the gross).
    const paymentId = await pendingPayment(t, ws, "9000000");
    const incoming = await incomingTransfer(ws.testKey, "9.00");
    const transferId = incoming.id;
    const browser = await signedIn("198.51.100.88");
    const csrf = await browser.csrf("/dashboard/sandbox/unmatched");
    const url = `/dashboard/sandbox/unmatched/${transferId}/attach`;
    const attached = await browser.post(url, { _csrf: csrf, paymentId });
    expect(attached.statusCode, attached.body.slice(0, 800)).toBe(303);
    expect(attached.headers.location).toBe("/dashboard/sandbox/unmatched?done=attached");
    // Sent twice: the first attached it to this payment, so the second is done too.
    expect((await browser.post(url, { _csrf: csrf, paymentId })).statusCode).toBe(303);
    expect((await paymentOf(ws.testKey, paymentId)).amountReceived).toBe("9.00");

    const after = await browser.get(attached.headers.location ?? "");
    expect(text(after)).toContain('id="unmatched-done" role="status">The transfer is attached');
    const row = rowOf(text(after), transferId);
    expect(row).toContain('data-status="attached"');
    expect(row).toContain(`href="/dashboard/sandbox/payments/${paymentId}"`);
    expect(row).not.toContain("<form");
    const detail = await browser.get(`/dashboard/sandbox/payments/${paymentId}`);
    expect(text(detail)).toContain('<dt>Amount received</dt><dd><span class="amount">9.00&nbsp;USDC');
  });
});

describe("another workspace's payments and transfers", () => {
  it("are 404 pages, and nothing is refunded, returned or attached", async () => {
    const otherEmail = `other-refunds-${Math.random().toString(36).slice(2, 8)}@shop.example`;
    const other = await createWorkspace(t, {
      name: "Other Co",
      adminEmail: otherEmail,
      adminPassword: PASSWORD,
    });
    const theirPayment = await sandboxPayment(other.testKey, "10.00");
    const theirTransfer = (await incomingTransfer(other.testKey, "2.00")).id;
    const myTransfer = (await incomingTransfer(ws.testKey, "2.50")).id;

    const mine = await signedIn("198.51.100.89");
    const page = await mine.get("/dashboard/sandbox/unmatched");
    const csrf = formToken(page.body);
    expect(text(page)).not.toContain(theirTransfer);
    const token = { _csrf: csrf, formToken: "a".repeat(24) };
    const notFound = (res: LightMyRequestResponse) => {
      expect(res.statusCode).toBe(404);
      expect(text(res)).toContain("<h1>Not found</h1>");
    };
    notFound(await mine.get(`/dashboard/sandbox/payments/${theirPayment}`));
    notFound(
      await mine.post(`/dashboard/sandbox/payments/${theirPayment}/refunds`, {
        ...token,
        amount: "1",
        destinationAddress: PAYER,
      }),
    );
    notFound(await mine.post(`/dashboard/sandbox/unmatched/${theirTransfer}/return`, token));
    notFound(
      await mine.post(`/dashboard/sandbox/unmatched/${theirTransfer}/attach`, {
        ...token,
        paymentId: theirPayment,
      }),
    );
    notFound(await mine.post("/dashboard/sandbox/unmatched/not-a-uuid/return", token));
    // The live inbox of my own workspace does not hold my sandbox transfer.
    notFound(await mine.post(`/dashboard/live/unmatched/${myTransfer}/return`, token));
    // Their payment, named in my attach form: not found, shown in my transfer's row.
    const attach = await mine.post(`/dashboard/sandbox/unmatched/${myTransfer}/attach`, {
      ...token,
      paymentId: theirPayment,
    });
    expect(attach.statusCode).toBe(404);
    expect(rowOf(text(attach), myTransfer)).toContain("Payment not found");

    expect((await refundsOf(other.testKey, theirPayment)).total).toBe(0);
    expect([...(await inbox(other.testKey)).values()]).toEqual(["open"]);
    expect((await paymentOf(other.testKey, theirPayment)).refundedAmount).toBe("0.00");
  });
});
