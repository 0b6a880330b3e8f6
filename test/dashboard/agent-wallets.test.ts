import { beforeAll, describe, expect, it } from "vitest";
import { agentWallet, PAYEE, payUsdc, putPolicy, RESOURCE } from "../support/agent-payments.ts";
import { call, type Json, t, useAgentsApp } from "../support/agents-and-wallets.ts";
import type { CreatedWorkspace } from "../support/app.ts";
import {
  ADMIN_PASSWORD,
  type DashboardClient,
  dashboardWorkspace,
  signedInAs,
} from "../support/dashboard.ts";

// The dashboard's agent wallets and approval queue (issue 40, D23) over HTTP (inject): the policy
// shown and replaced through AgentPaymentsService with step-up (D21), its refusals as messages,
// and waiting payments approved or denied with step-up, in the session's workspace only.

useAgentsApp();

let ws: CreatedWorkspace;
let email: string;
let other: CreatedWorkspace;
let otherEmail: string;
beforeAll(async () => {
  ({ ws, email } = await dashboardWorkspace(t, "agents", "Agents Co"));
  ({ ws: other, email: otherEmail } = await dashboardWorkspace(t, "rival-agents", "Rival Agents"));
});

const AGENTS = "/dashboard/sandbox/agents";
const APPROVALS = "/dashboard/sandbox/approvals";

async function policyOf(walletId: string): Promise<Json> {
  const res = await call(ws.testKey, "GET", `/api/wallets/${walletId}/policy`);
  expect(res.status, res.body).toBe(200);
  return res.json.data;
}

/** A wallet whose payments above 2 USDC wait, and one such payment of `amount` waiting. */
async function waitingPayment(
  on: CreatedWorkspace,
  amount = "3.50",
): Promise<{ wallet: Json; authorizationId: string }> {
  const wallet = await agentWallet(on);
  expect((await putPolicy(on.testKey, wallet.walletId, { approvalAbove: { USDC: "2.00" } })).status).toBe(
    200,
  );
  const res = await payUsdc(on.testKey, wallet.walletId, amount);
  expect(res.status, res.body).toBe(202);
  return { wallet, authorizationId: res.json.data.authorizationId };
}

async function statusOf(on: CreatedWorkspace, walletId: string, authorizationId: string): Promise<string> {
  const res = await call(
    on.testKey,
    "GET",
    `/api/wallets/${walletId}/x402/authorizations/${authorizationId}`,
  );
  expect(res.status, res.body).toBe(200);
  return res.json.data.status;
}

/** A page's text with the entities our templates write for "/", "=" and "&" read back. */
const unescaped = (body: string) =>
  body.replaceAll("&#x2F;", "/").replaceAll("&#x3D;", "=").replaceAll("&amp;", "&");

function policyForm(csrf: string, fields: Record<string, string>, password = ADMIN_PASSWORD) {
  return { _csrf: csrf, currentPassword: password, ...fields };
}

describe("the agent wallets page", () => {
  let browser: DashboardClient;
  let wallet: Json;
  beforeAll(async () => {
    browser = await signedInAs(t, "198.51.100.81", email);
    wallet = await agentWallet(ws);
    const res = await putPolicy(ws.testKey, wallet.walletId, {
      maxPerPayment: { USDC: "5.00" },
      allowedOrigins: ["https://api.example.com"],
    });
    expect(res.status, res.body).toBe(200);
  });

  it("is in the navigation and shows each agent wallet with its policy", async () => {
    const page = await browser.get(AGENTS);
    expect(page.statusCode).toBe(200);
    const body = unescaped(page.body);
    expect(body).toContain('href="/dashboard/sandbox/agents" aria-current="page">Agent wallets</a>');
    expect(body).toContain('href="/dashboard/sandbox/approvals"');
    const card = body.slice(body.indexOf(`data-wallet-id="${wallet.walletId}"`));
    expect(card).toContain(`Agent ${wallet.ownerId}`);
    expect(card).toContain("5.00 USDC");
    expect(card).toContain("https://api.example.com");
    expect(card).toMatch(/name="maxPerPayment-USDC"[^>]*value="5.00"/);
  });

  it("saves an edited policy with the current password", async () => {
    const csrf = await browser.csrf(AGENTS);
    const res = await browser.post(
      `${AGENTS}/${wallet.walletId}/policy`,
      policyForm(csrf, {
        "maxPerPayment-USDC": "7.5",
        "daily-USDC": "20",
        "approvalAbove-USDC": "2.00",
        "allowedPayees-on": "on",
        allowedPayees: `${PAYEE}\n`,
        allowedOrigins: "https://ignored.example",
      }),
    );
    expect(res.statusCode, res.body.slice(0, 400)).toBe(303);
    expect(res.headers.location).toBe(`${AGENTS}?notice=policy-saved`);
    expect(await policyOf(wallet.walletId)).toEqual({
      maxPerPayment: { USDC: "7.50" },
      daily: { USDC: "20.00" },
      allowedPayees: [PAYEE.toLowerCase()],
      approvalAbove: { USDC: "2.00" },
    });
    const page = await browser.get(res.headers.location ?? "");
    expect(page.body).toContain("Spending policy saved.");
  });

  it("changes nothing with a wrong or missing password", async () => {
    const before = await policyOf(wallet.walletId);
    const csrf = await browser.csrf(AGENTS);
    const wrong = await browser.post(
      `${AGENTS}/${wallet.walletId}/policy`,
      policyForm(csrf, { "maxPerPayment-USDC": "999" }, "not the password"),
    );
    expect(wrong.statusCode).toBe(400);
    expect(wrong.body).toContain("The current password is not right: nothing was changed");
    // The form comes back as typed, the password empty.
    expect(wrong.body).toMatch(/name="maxPerPayment-USDC"[^>]*value="999"/);
    expect(wrong.body).not.toContain("not the password");
    const missing = await browser.post(`${AGENTS}/${wallet.walletId}/policy`, {
      _csrf: csrf,
      "maxPerPayment-USDC": "999",
    });
    expect(missing.statusCode).toBe(400);
    expect(await policyOf(wallet.walletId)).toEqual(before);
  });

  it("shows the service's message for bad input, not a 500", async () => {
    const before = await policyOf(wallet.walletId);
    const csrf = await browser.csrf(AGENTS);
    for (const [fields, message] of [
      [{ "daily-USDC": "lots" }, "daily.USDC must be a decimal string"],
      [{ "allowedPayees-on": "on", allowedPayees: "0x123" }, "allowedPayees must list addresses"],
      [
        { "allowedOrigins-on": "on", allowedOrigins: "https://a.example/path" },
        "allowedOrigins must list origins",
      ],
    ] as const) {
      const res = await browser.post(`${AGENTS}/${wallet.walletId}/policy`, policyForm(csrf, fields));
      expect(res.statusCode, res.body.slice(0, 300)).toBe(400);
      expect(res.body).toContain(message);
    }
    expect(await policyOf(wallet.walletId)).toEqual(before);
  });

  it("keeps another workspace's wallets out: not listed, and its policy cannot be saved (404)", async () => {
    const theirs = await agentWallet(other);
    const page = await browser.get(AGENTS);
    expect(page.body).not.toContain(theirs.walletId);
    const csrf = await browser.csrf(AGENTS);
    const res = await browser.post(
      `${AGENTS}/${theirs.walletId}/policy`,
      policyForm(csrf, { "maxPerPayment-USDC": "1" }),
    );
    expect(res.statusCode).toBe(404);
    const mine = await call(other.testKey, "GET", `/api/wallets/${theirs.walletId}/policy`);
    expect(mine.json.data).toEqual({});
  });
});

describe("the approval queue", () => {
  let browser: DashboardClient;
  beforeAll(async () => {
    browser = await signedInAs(t, "198.51.100.82", email);
  });

  it("lists a payment waiting for approval with its wallet, amount, payee and resource", async () => {
    const { wallet, authorizationId } = await waitingPayment(ws, "3.25");
    const page = await browser.get(APPROVALS);
    expect(page.statusCode).toBe(200);
    const body = unescaped(page.body);
    const row = body.slice(body.indexOf(`data-authorization-id="${authorizationId}"`));
    expect(row).toContain(`<td class="num">3.25</td><td>USDC</td>`);
    expect(row).toContain(wallet.ownerId);
    expect(row).toContain(RESOURCE);
    expect(row).toContain("sandbox-a");
    expect(row).toContain(`${APPROVALS}/${wallet.walletId}/${authorizationId}/approve`);
    expect(row).toContain(`formaction="${APPROVALS}/${wallet.walletId}/${authorizationId}/deny"`);
  });

  it("approves only with the current password, then the authorization is authorized", async () => {
    const { wallet, authorizationId } = await waitingPayment(ws);
    const url = `${APPROVALS}/${wallet.walletId}/${authorizationId}`;
    const csrf = await browser.csrf(APPROVALS);
    const wrong = await browser.post(`${url}/approve`, { _csrf: csrf, currentPassword: "nope nope" });
    expect(wrong.statusCode).toBe(400);
    expect(wrong.body).toContain("The current password is not right: nothing was changed");
    expect(await statusOf(ws, wallet.walletId, authorizationId)).toBe("approval_required");

    const res = await browser.post(`${url}/approve`, { _csrf: csrf, currentPassword: ADMIN_PASSWORD });
    expect(res.statusCode, res.body.slice(0, 400)).toBe(200);
    expect(res.body).toContain("Payment approved");
    expect(res.body).toContain("<strong>authorized</strong>");
    expect(await statusOf(ws, wallet.walletId, authorizationId)).toBe("authorized");
    expect((await browser.get(APPROVALS)).body).not.toContain(authorizationId);
    // Twice is the service's 409, as a page.
    const again = await browser.post(`${url}/approve`, { _csrf: csrf, currentPassword: ADMIN_PASSWORD });
    expect(again.statusCode).toBe(409);
  });

  it("denies with the current password, releasing the payment", async () => {
    const { wallet, authorizationId } = await waitingPayment(ws);
    const url = `${APPROVALS}/${wallet.walletId}/${authorizationId}`;
    const csrf = await browser.csrf(APPROVALS);
    const missing = await browser.post(`${url}/deny`, { _csrf: csrf });
    expect(missing.statusCode).toBe(400);
    expect(await statusOf(ws, wallet.walletId, authorizationId)).toBe("approval_required");
    const res = await browser.post(`${url}/deny`, { _csrf: csrf, currentPassword: ADMIN_PASSWORD });
    expect(res.statusCode).toBe(303);
    expect(res.headers.location).toBe(`${APPROVALS}?notice=payment-denied`);
    expect(await statusOf(ws, wallet.walletId, authorizationId)).toBe("denied");
  });

  it("keeps another workspace's waiting payments out: not listed, not approvable or deniable (404)", async () => {
    const { wallet, authorizationId } = await waitingPayment(other);
    expect((await browser.get(APPROVALS)).body).not.toContain(authorizationId);
    const csrf = await browser.csrf(APPROVALS);
    const url = `${APPROVALS}/${wallet.walletId}/${authorizationId}`;
    for (const action of ["approve", "deny"]) {
      const res = await browser.post(`${url}/${action}`, { _csrf: csrf, currentPassword: ADMIN_PASSWORD });
      expect(res.statusCode, action).toBe(404);
    }
    // Nor in the live dashboard of the same workspace.
    const live = await browser.post(
      `/dashboard/live/approvals/${wallet.walletId}/${authorizationId}/approve`,
      {
        _csrf: csrf,
        currentPassword: ADMIN_PASSWORD,
      },
    );
    expect(live.statusCode).toBe(404);
    expect(await statusOf(other, wallet.walletId, authorizationId)).toBe("approval_required");
    // Its own merchant sees it.
    const theirs = await signedInAs(t, "198.51.100.83", otherEmail);
    expect((await theirs.get(APPROVALS)).body).toContain(authorizationId);
  });
});
