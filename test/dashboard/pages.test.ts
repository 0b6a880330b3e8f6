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

// The dashboard's API keys, settings, wallets and unmatched pages over HTTP (inject), on PGlite or
// the PostgreSQL of DATABASE_URL.

const PASSWORD = ADMIN_PASSWORD;
let t: TestApp;
let ws: CreatedWorkspace;
let email: string;

beforeAll(async () => {
  t = await startTestApp();
  ({ ws, email } = await dashboardWorkspace(t, "pages", "Pages Co"));
});

afterAll(async () => {
  await t?.close();
});

const signedIn = (ip: string, password = PASSWORD) => signedInAs(t, ip, email, password);

describe("API keys", () => {
  it("creates a key shown once that works at once, and revokes it", async () => {
    const browser = await signedIn("198.51.100.21");
    const csrf = await browser.csrf("/dashboard/sandbox/keys");
    const created = await browser.post("/dashboard/sandbox/keys", { _csrf: csrf, name: "CI <deploy>" });
    expect(created.statusCode).toBe(201);
    const key = /id="new-key-value" readonly value="(svc_test_[0-9A-Za-z]+)"/.exec(created.body)?.[1];
    expect(key).toBeDefined();
    expect(created.body).toContain("CI &lt;deploy&gt;");
    const use = await t.request({ method: "GET", url: "/api/v1/payments", headers: bearer(key ?? "") });
    expect(use.statusCode).toBe(200);

    // Never shown again: the list has its prefix only.
    const list = await browser.get("/dashboard/sandbox/keys");
    expect(list.body).not.toContain(key);
    expect(list.body).toContain(`${key?.slice(0, 12)}…`);

    const id = keyIdOnPage(list.body, key?.slice(0, 12) ?? "");
    expect(id).toMatch(/^[0-9a-f-]{36}$/);
    const revoked = await browser.post(`/dashboard/sandbox/keys/${id}/revoke`, { _csrf: csrf });
    expect(revoked.statusCode).toBe(303);
    expect(revoked.headers.location).toBe("/dashboard/sandbox/keys?notice=key-revoked");
    const refused = await t.request({ method: "GET", url: "/api/v1/payments", headers: bearer(key ?? "") });
    expect(refused.statusCode).toBe(401);
  });

  it("creates keys of the page's environment only", async () => {
    const browser = await signedIn("198.51.100.22");
    const csrf = await browser.csrf("/dashboard/live/keys");
    const created = await browser.post("/dashboard/live/keys", {
      _csrf: csrf,
      name: "",
      currentPassword: PASSWORD,
    });
    expect(created.statusCode).toBe(201);
    expect(created.body).toMatch(/value="svc_live_[0-9A-Za-z]+"/);
  });

  it("answers 404 for a key of another workspace, and revokes nothing", async () => {
    const other = await createWorkspace(t, { name: "Other" });
    const keys = await t.request({ method: "GET", url: "/api/v1/keys", headers: bearer(other.testKey) });
    expect(keys.statusCode, keys.body).toBe(200);
    const listed = keys.json() as { apiKeys: Array<{ id: string }> };
    const theirs = listed.apiKeys[0]?.id;
    expect(theirs).toMatch(/^[0-9a-f-]{36}$/);
    const browser = await signedIn("198.51.100.23");
    const csrf = await browser.csrf("/dashboard/sandbox/keys");
    const res = await browser.post(`/dashboard/sandbox/keys/${theirs}/revoke`, { _csrf: csrf });
    expect(res.statusCode).toBe(404);
    const still = await t.request({ method: "GET", url: "/api/v1/payments", headers: bearer(other.testKey) });
    expect(still.statusCode).toBe(200);
  });
});

describe("settings", () => {
  it("saves the settlement address, and shows a bad one next to its field keeping what was typed", async () => {
    const browser = await signedIn("198.51.100.24");
    const csrf = await browser.csrf("/dashboard/sandbox/settings");
    const bad = await browser.post("/dashboard/sandbox/settings", {
      _csrf: csrf,
      settlementAddress: "0x123<b>",
      adminEmail: email,
      currentPassword: PASSWORD,
    });
    expect(bad.statusCode).toBe(400);
    expect(bad.body).toMatch(
      /id="settlementAddress-error">settlementAddress must be 0x followed by 40 hex characters/,
    );
    expect(bad.body).toContain('value="0x123&lt;b&gt;"');
    const address = "0x2222222222222222222222222222222222222222";
    const saved = await browser.post("/dashboard/sandbox/settings", {
      _csrf: csrf,
      settlementAddress: address,
      adminEmail: email,
      currentPassword: PASSWORD,
    });
    expect(saved.statusCode).toBe(303);
    const ws2 = await t.request({
      method: "GET",
      url: `/api/v1/workspaces/${ws.id}`,
      headers: { authorization: "Bearer test-admin-secret-0123456789" },
    });
    expect(ws2.json().workspace.settlement_address).toBe(address);
  });

  it("changes the password: the old one stops working and other sessions end", async () => {
    const other = await signedIn("198.51.100.25");
    const browser = await signedIn("198.51.100.26");
    const csrf = await browser.csrf("/dashboard/sandbox/settings");
    const wrong = await browser.post("/dashboard/sandbox/settings/password", {
      _csrf: csrf,
      currentPassword: "not it at all!!",
      newPassword: "a brand new password",
    });
    expect(wrong.statusCode).toBe(400);
    expect(wrong.body).toContain("The current password is not right");
    const short = await browser.post("/dashboard/sandbox/settings/password", {
      _csrf: csrf,
      currentPassword: PASSWORD,
      newPassword: "short",
    });
    expect(short.statusCode).toBe(400);
    const changed = await browser.post("/dashboard/sandbox/settings/password", {
      _csrf: csrf,
      currentPassword: PASSWORD,
      newPassword: "a brand new password",
    });
    expect(changed.statusCode).toBe(303);
    expect((await browser.get("/dashboard/sandbox")).statusCode).toBe(200);
    expect((await other.get("/dashboard/sandbox")).statusCode).toBe(303);
    expect((await new DashboardClient(t, "198.51.100.27").login(email, PASSWORD)).statusCode).toBe(401);
    // Back to the shared password for the other tests.
    const again = await browser.post("/dashboard/sandbox/settings/password", {
      _csrf: csrf,
      currentPassword: "a brand new password",
      newPassword: PASSWORD,
    });
    expect(again.statusCode).toBe(303);
  });
});

describe("the current password", () => {
  it("is limited per session like a login: after five wrong guesses the next waits 30 s, the right one too", async () => {
    const own = `limited-${Math.random().toString(36).slice(2, 8)}@shop.example`;
    await createWorkspace(t, { name: "Guarded", adminEmail: own, adminPassword: PASSWORD });
    const browser = new DashboardClient(t, "198.51.100.40");
    expect((await browser.login(own, PASSWORD)).statusCode).toBe(303);
    const csrf = await browser.csrf("/dashboard/sandbox/settings");
    const change = (currentPassword: string) =>
      browser.post("/dashboard/sandbox/settings/password", {
        _csrf: csrf,
        currentPassword,
        newPassword: "a brand new password",
      });
    const start = new Date();
    t.setNow(start);
    try {
      const answers: number[] = [];
      for (let i = 0; i < 6; i++) answers.push((await change(`wrong guess ${i}`)).statusCode);
      expect(answers).toEqual([400, 400, 400, 400, 400, 429]);
      const right = await change(PASSWORD);
      expect(right.statusCode).toBe(429);
      expect(right.headers["retry-after"]).toBe("30");
      expect(right.body).toContain("Too many wrong passwords. Try again in 30 seconds");
      // Nothing changed: the old password still signs in (from another address).
      expect((await new DashboardClient(t, "198.51.100.41").login(own, PASSWORD)).statusCode).toBe(303);
      // Another session of the workspace has its own count.
      const other = new DashboardClient(t, "198.51.100.42");
      expect((await other.login(own, PASSWORD)).statusCode).toBe(303);
      const otherCsrf = await other.csrf("/dashboard/sandbox/settings");
      const wrongThere = await other.post("/dashboard/sandbox/settings/password", {
        _csrf: otherCsrf,
        currentPassword: "wrong again",
        newPassword: "a brand new password",
      });
      expect(wrongThere.statusCode).toBe(400);
      // Once the wait is over, the right password is checked again; a right one clears the count.
      t.setNow(new Date(start.getTime() + 31_000));
      const back = await change(PASSWORD);
      expect(back.statusCode, back.body.slice(0, 300)).toBe(303);
      expect((await change("wrong once more")).statusCode).toBe(400);
    } finally {
      t.setNow(undefined);
    }
  });
});

describe("wallets and the unmatched inbox", () => {
  it("shows the EOA with its QR code, and the smart wallet once created through the 4.14 endpoint", async () => {
    const browser = await signedIn("198.51.100.28");
    const before = await browser.get("/dashboard/sandbox/wallets");
    expect(before.statusCode).toBe(200);
    expect(before.body).toContain(`data-copy="${ws.eoaAddress}"`);
    expect(before.body).toMatch(/<svg[^>]*>/);
    expect(before.body).toContain('id="create-smart-wallet"');
    const token = formToken(before.body);
    const created = await t.request({
      method: "POST",
      url: "/api/workspaces/smart-wallet",
      headers: { cookie: `svc_session=${browser.cookies.get("svc_session")}`, "x-csrf-token": token },
    });
    expect(created.statusCode, created.body).toBe(200);
    const address = created.json().smartWallet.address as string;
    const after = await browser.get("/dashboard/sandbox/wallets");
    expect(after.body).toContain(`data-copy="${address}"`);
    expect(after.body).not.toContain('id="create-smart-wallet"');
  });

  it("shows each wallet's balances on each network, on the wallets page and the overview (D22)", async () => {
    const other = await dashboardWorkspace(t, "pages-networks", "Networks Co");
    const faucet = (payload: Record<string, unknown>) =>
      t.request({
        method: "POST",
        url: "/api/v1/sandbox/faucet",
        headers: bearer(other.ws.testKey),
        payload: { tokenSymbol: "USDC", ...payload },
      });
    expect((await faucet({ amount: "12.5" })).statusCode).toBe(200);
    expect((await faucet({ amount: "3", network: "sandbox-b" })).statusCode).toBe(200);
    const browser = await signedInAs(t, "198.51.100.62", other.email, PASSWORD);
    const row = (network: string, usdc: string) =>
      new RegExp(
        `<tr><th scope="row">${network}</th><td class="num">${usdc.replace(".", "\\.")}</td><td class="num">0\\.00</td>`,
      );
    for (const path of ["/dashboard/sandbox/wallets", "/dashboard/sandbox"]) {
      const page = await browser.get(path);
      expect(page.statusCode).toBe(200);
      const table = /<table class="compact" aria-label="Balances by network">[\s\S]*?<\/table>/.exec(
        page.body,
      )?.[0];
      expect(table, path).toBeDefined();
      expect(table).toContain('<th scope="col" class="num">USDC</th>');
      expect(table).toMatch(row("sandbox-a", "12.50"));
      expect(table).toMatch(row("sandbox-b", "3.00"));
    }
  });

  it("shows a clear empty state when no transfer went unmatched", async () => {
    const browser = await signedIn("198.51.100.29");
    const res = await browser.get("/dashboard/sandbox/unmatched");
    expect(res.statusCode).toBe(200);
    expect(res.body).toContain("No unmatched transfers.");
  });
});

/** The id of the key row whose prefix is `prefix`, from the keys page. */
describe("networks on the payments and payouts pages (D22)", () => {
  it("shows each payment's and payout's network, and filters both lists and their CSV by network", async () => {
    const api = (url: string, payload: Record<string, unknown>) =>
      t.request({ method: "POST", url, headers: bearer(ws.testKey), payload });
    const made = await api("/api/v1/payments", {
      tokenSymbol: "USDC",
      amount: "4.25",
      description: "On sandbox-a",
    });
    expect(made.statusCode, made.body).toBe(201);
    const paymentId: string = made.json().payment.id;
    await api("/api/v1/sandbox/faucet", { tokenSymbol: "USDC", amount: "10" });
    const paid = await api("/api/v1/payouts", {
      tokenSymbol: "USDC",
      amount: "1.5",
      destinationAddress: "0x2222222222222222222222222222222222222222",
      description: "Payout on sandbox-a",
      network: "sandbox-a",
    });
    expect(paid.statusCode, paid.body).toBe(200);
    const payoutTx: string = paid.json().payout.txHash;
    const browser = await signedIn("198.51.100.61");

    const payments = await browser.get("/dashboard/sandbox/payments");
    expect(payments.body).toContain('<th scope="col" class="wide-only">Network</th>');
    expect(payments.body).toMatch(
      /<select id="f-network" name="network"><option value="">Any<\/option><option value="sandbox-a" >sandbox-a<\/option><option value="sandbox-b" >sandbox-b<\/option><\/select>/,
    );
    const row =
      new RegExp(`<tr data-payment-id="${paymentId}">[\\s\\S]*?</tr>`).exec(payments.body)?.[0] ?? "";
    expect(row).toContain('<td class="wide-only">sandbox-a</td>');
    const onA = await browser.get("/dashboard/sandbox/payments?network=sandbox-a");
    expect(onA.body).toContain(`data-payment-id="${paymentId}"`);
    expect(onA.body).toMatch(/<option value="sandbox-a" selected>/);
    expect(onA.body).toContain("payments/export.csv?network&#x3D;sandbox-a");
    const elsewhere = await browser.get("/dashboard/sandbox/payments?network=sandbox-b");
    expect(elsewhere.body).not.toContain(`data-payment-id="${paymentId}"`);
    expect(elsewhere.body).toContain("No payments match these filters.");
    const bad = await browser.get("/dashboard/sandbox/payments?network=Not%20an%20id");
    expect(bad.body).toContain(
      "network must be a network id, as GET &#x2F;api&#x2F;v1&#x2F;networks lists them",
    );
    const detail = await browser.get(`/dashboard/sandbox/payments/${paymentId}`);
    expect(detail.body).toMatch(/<dt>Network<\/dt>\s*<dd>sandbox-a<\/dd>/);

    const payouts = await browser.get("/dashboard/sandbox/payouts?network=sandbox-a");
    expect(payouts.body).toContain("Payout on sandbox-a");
    expect(payouts.body).toContain('<th scope="col" class="wide-only">Network</th>');
    expect(payouts.body).toMatch(/<option value="sandbox-a" selected>sandbox-a<\/option>/);
    expect(payouts.body).toContain("payouts/export.csv?network&#x3D;sandbox-a");
    const none = await browser.get("/dashboard/sandbox/payouts?network=sandbox-b");
    expect(none.body).not.toContain("Payout on sandbox-a");
    expect(none.body).toContain("No payouts match these filters.");
    const csv = await browser.get("/dashboard/sandbox/payouts/export.csv?network=sandbox-b");
    expect(csv.body.trim().split("\n")).toHaveLength(1);
    const apiCsv = await t.request({
      method: "GET",
      url: "/api/v1/payouts/export.csv?network=sandbox-a",
      headers: bearer(ws.testKey),
    });
    expect(apiCsv.body).toContain(payoutTx);
  });
});

function keyIdOnPage(body: string, prefix: string): string | undefined {
  for (const match of body.matchAll(/<tr data-key-id="([0-9a-f-]{36})"><td class="mono nowrap">([^<…]+)…/g)) {
    if (match[2] === prefix) return match[1];
  }
  return undefined;
}
