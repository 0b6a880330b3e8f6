import type { InjectOptions } from "fastify";
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openDatabase } from "../../src/platform/db/database.ts";
import {
  ADMIN_SECRET,
  bearer,
  type CreatedWorkspace,
  createWorkspace,
  startTestApp,
  type TestApp,
} from "../support/app.ts";
import { migratorUpTo } from "../support/migrations.ts";
import { startRpcProxy } from "../support/rpc-proxy.ts";

// The default wallet type per environment (D21): a sandbox key reads and sets the sandbox's, a
// live key the live one's, the admin secret and the dashboard session live unless
// ?environment=sandbox. Payments and payouts of an environment use its default, and nothing a
// sandbox key does changes what live does. The live network is configured (live payments take
// their real path) but its RPC endpoint answers only the latest block (its node answers): nothing
// here reads the chain otherwise.

type Json = Record<string, unknown>;

let rpc: Awaited<ReturnType<typeof startRpcProxy>>;
let t: TestApp;

beforeAll(async () => {
  // The latest block is the one call answered: a payment is created only on a network whose
  // node answers (D22).
  rpc = await startRpcProxy("http://127.0.0.1:9", async ({ method }) =>
    method === "eth_getBlockByNumber"
      ? { result: { number: "0x1", hash: `0x${"11".repeat(32)}`, timestamp: "0x1", transactions: [] } }
      : { error: { code: -32000, message: "no chain" } },
  );
  t = await startTestApp({
    LIVE_RPC_URL: rpc.url,
    LIVE_CHAIN_ID: "31337",
    LIVE_USDC_ADDRESS: "0x5FbDB2315678afecb367f032d93F642f64180aa3",
    LIVE_ADAO_ADDRESS: "0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512",
    LIVE_TREASURY_ADDRESS: "0x70997970C51812dc3A010C7d01b50e0d17dc79C8",
    RATE_LIMIT_SANDBOX: "100000",
    RATE_LIMIT_LIVE: "100000",
  });
});

afterAll(async () => {
  await t?.close();
  await rpc?.close();
});

const url = (ws: CreatedWorkspace, query = "") => `/api/v1/workspaces/${ws.id}/smart-wallet${query}`;

function call(method: "GET" | "POST" | "PATCH", path: string, token: string, payload?: Json) {
  const options: InjectOptions = { method, url: path, headers: bearer(token) };
  if (payload !== undefined) options.payload = payload;
  return t.request(options);
}

/** Each environment's default as its own key reads it, and as the admin secret reads both. */
async function defaults(ws: CreatedWorkspace) {
  const read = async (token: string, query = "") => {
    const res = await call("GET", url(ws, query), token);
    expect(res.statusCode, res.body).toBe(200);
    return res.json().defaultWalletType as string;
  };
  return {
    sandbox: await read(ws.testKey),
    live: await read(ws.liveKey),
    adminLive: await read(ADMIN_SECRET),
    adminSandbox: await read(ADMIN_SECRET, "?environment=sandbox"),
  };
}

async function withSmartWallet(): Promise<CreatedWorkspace & { smartWallet: string }> {
  const ws = await createWorkspace(t);
  const res = await call("POST", url(ws), ws.testKey);
  expect(res.statusCode, res.body).toBe(201);
  return { ...ws, smartWallet: res.json().smartWallet.address };
}

/** The address a payment without walletType receives on, in the key's environment. */
async function receivingAddress(key: string): Promise<string> {
  const res = await t.request({
    method: "POST",
    url: "/api/v1/payments",
    headers: bearer(key),
    payload: {
      tokenSymbol: "USDC",
      amount: "5",
      merchantWallet: "0x3333333333333333333333333333333333333333",
    },
  });
  expect(res.statusCode, res.body).toBe(201);
  return res.json().payment.receivingAddress as string;
}

describe("each environment has its own default wallet type (D21)", () => {
  it("a sandbox key sets and reads the sandbox default; live's stays", async () => {
    const ws = await withSmartWallet();
    const set = await call("PATCH", url(ws), ws.testKey, { defaultWalletType: "smart_wallet" });
    expect(set.statusCode, set.body).toBe(200);
    expect(set.json()).toEqual({ success: true, workspaceId: ws.id, defaultWalletType: "smart_wallet" });
    expect(await defaults(ws)).toEqual({
      sandbox: "smart_wallet",
      live: "workspace",
      adminLive: "workspace",
      adminSandbox: "smart_wallet",
    });
    // The workspace as each key reads it shows that key's environment's default.
    const view = async (token: string) =>
      (await call("GET", `/api/v1/workspaces/${ws.id}`, token)).json().workspace.defaultWalletType;
    expect(await view(ws.testKey)).toBe("smart_wallet");
    expect(await view(ws.liveKey)).toBe("workspace");
    expect(await view(ADMIN_SECRET)).toBe("workspace");
  });

  it("a live key sets the live default only", async () => {
    const ws = await withSmartWallet();
    const set = await call("PATCH", url(ws), ws.liveKey, { defaultWalletType: "smart_wallet" });
    expect(set.statusCode, set.body).toBe(200);
    expect(await defaults(ws)).toEqual({
      sandbox: "workspace",
      live: "smart_wallet",
      adminLive: "smart_wallet",
      adminSandbox: "workspace",
    });
  });

  it("POST …/smart-wallet with setDefault: true and a sandbox key makes it the sandbox default", async () => {
    const ws = await createWorkspace(t);
    const res = await call("POST", url(ws), ws.testKey, { setDefault: true });
    expect(res.statusCode, res.body).toBe(201);
    expect(res.json().defaultWalletType).toBe("smart_wallet");
    expect(await defaults(ws)).toMatchObject({ sandbox: "smart_wallet", live: "workspace" });
  });

  it("the admin secret sets live unless ?environment=sandbox", async () => {
    const ws = await withSmartWallet();
    const live = await call("PATCH", url(ws), ADMIN_SECRET, { defaultWalletType: "smart_wallet" });
    expect(live.statusCode, live.body).toBe(200);
    expect(await defaults(ws)).toMatchObject({ sandbox: "workspace", live: "smart_wallet" });
    const sandbox = await call("PATCH", url(ws, "?environment=sandbox"), ADMIN_SECRET, {
      defaultWalletType: "smart_wallet",
    });
    expect(sandbox.statusCode, sandbox.body).toBe(200);
    const back = await call("PATCH", url(ws, "?environment=live"), ADMIN_SECRET, {
      defaultWalletType: "workspace",
    });
    expect(back.statusCode, back.body).toBe(200);
    expect(await defaults(ws)).toMatchObject({ sandbox: "smart_wallet", live: "workspace" });
    // On creation too.
    const other = await createWorkspace(t);
    const created = await call("POST", url(other, "?environment=sandbox"), ADMIN_SECRET, {
      setDefault: true,
    });
    expect(created.statusCode, created.body).toBe(201);
    expect(await defaults(other)).toMatchObject({ sandbox: "smart_wallet", live: "workspace" });
  });

  it.each(["test", "LIVE", "", "production"])(
    "environment=%s → 400 naming the parameter, and nothing changes",
    async (value) => {
      const ws = await withSmartWallet();
      for (const [method, payload] of [
        ["PATCH", { defaultWalletType: "smart_wallet" }],
        ["POST", { setDefault: true }],
        ["GET", undefined],
      ] as const) {
        const res = await call(method, url(ws, `?environment=${value}`), ADMIN_SECRET, payload);
        expect(res.statusCode, `${method}: ${res.body}`).toBe(400);
        expect(res.json().error).toMatch(/^environment /);
      }
      expect(await defaults(ws)).toMatchObject({ sandbox: "workspace", live: "workspace" });
    },
  );

  it("a key naming the other environment → 403, and nothing changes", async () => {
    const ws = await withSmartWallet();
    const sandboxToLive = await call("PATCH", url(ws, "?environment=live"), ws.testKey, {
      defaultWalletType: "smart_wallet",
    });
    expect(sandboxToLive.statusCode, sandboxToLive.body).toBe(403);
    expect(sandboxToLive.json().error).toMatch(/sandbox key reads and sets the sandbox settings only/);
    const viaCreate = await call("POST", url(ws, "?environment=live"), ws.testKey, { setDefault: true });
    expect(viaCreate.statusCode, viaCreate.body).toBe(403);
    const liveToSandbox = await call("PATCH", url(ws, "?environment=sandbox"), ws.liveKey, {
      defaultWalletType: "smart_wallet",
    });
    expect(liveToSandbox.statusCode, liveToSandbox.body).toBe(403);
    const peek = await call("GET", url(ws, "?environment=live"), ws.testKey);
    expect(peek.statusCode, peek.body).toBe(403);
    // Its own environment named explicitly is fine.
    const own = await call("GET", url(ws, "?environment=sandbox"), ws.testKey);
    expect(own.statusCode, own.body).toBe(200);
    expect(await defaults(ws)).toMatchObject({ sandbox: "workspace", live: "workspace" });
  });

  it("the dashboard session sets live unless ?environment=sandbox", async () => {
    const ws = await withSmartWallet();
    const opened = await t.app.services.sessions.open(ws.id);
    const headers = { cookie: `svc_session=${opened.token}`, "x-csrf-token": opened.csrfToken };
    const patch = (query: string, value: string) =>
      t.request({
        method: "PATCH",
        url: `/api/workspaces/smart-wallet${query}`,
        headers,
        payload: { defaultWalletType: value },
      });
    expect((await patch("?environment=sandbox", "smart_wallet")).statusCode).toBe(200);
    expect(await defaults(ws)).toMatchObject({ sandbox: "smart_wallet", live: "workspace" });
    expect((await patch("", "smart_wallet")).statusCode).toBe(200);
    expect((await patch("?environment=sandbox", "workspace")).statusCode).toBe(200);
    expect(await defaults(ws)).toMatchObject({ sandbox: "workspace", live: "smart_wallet" });
    const bad = await patch("?environment=staging", "workspace");
    expect(bad.statusCode, bad.body).toBe(400);
    expect(bad.json().error).toMatch(/^environment /);
  });
});

describe("the dashboard's wallets page (D21)", () => {
  // An app without a live network: the page reads balances, and this test is not about the RPC.
  let plain: TestApp;
  beforeAll(async () => {
    plain = await startTestApp({ RATE_LIMIT_SANDBOX: "100000", RATE_LIMIT_LIVE: "100000" });
  });
  afterAll(async () => plain?.close());

  it("shows its own environment's default and saves to it", async () => {
    const ws = await createWorkspace(plain);
    const path = `/api/v1/workspaces/${ws.id}/smart-wallet`;
    expect((await plain.request({ method: "POST", url: path, headers: bearer(ws.testKey) })).statusCode).toBe(
      201,
    );
    const set = await plain.request({
      method: "PATCH",
      url: path,
      headers: bearer(ws.testKey),
      payload: { defaultWalletType: "smart_wallet" },
    });
    expect(set.statusCode, set.body).toBe(200);
    const opened = await plain.app.services.sessions.open(ws.id);
    const page = async (env: string) => {
      const res = await plain.request({
        method: "GET",
        url: `/dashboard/${env}/wallets`,
        headers: { cookie: `svc_session=${opened.token}` },
      });
      expect(res.statusCode, res.body).toBe(200);
      return res.body;
    };
    const checked = (body: string) => /name="defaultWalletType" value="(\w+)" checked/.exec(body)?.[1];
    const sandbox = await page("sandbox");
    expect(checked(sandbox)).toBe("smart_wallet");
    expect(sandbox).toContain('data-action="save-default" data-environment="sandbox"');
    const live = await page("live");
    expect(checked(live)).toBe("workspace");
    expect(live).toContain('data-action="save-default" data-environment="live"');
  });
});

describe("payments and payouts use their environment's default (D21)", () => {
  it("nothing a sandbox key does changes which wallet live payments receive on", async () => {
    const ws = await withSmartWallet();
    const eoa = ws.eoaAddress.toLowerCase();
    const smart = ws.smartWallet.toLowerCase();
    const lower = async (key: string) => (await receivingAddress(key)).toLowerCase();
    expect(await lower(ws.liveKey)).toBe(eoa);

    // Everything a sandbox key can do to the default.
    expect((await call("PATCH", url(ws), ws.testKey, { defaultWalletType: "smart_wallet" })).statusCode).toBe(
      200,
    );
    expect((await call("POST", url(ws), ws.testKey, { setDefault: true })).statusCode).toBe(200);
    expect(await lower(ws.testKey)).toBe(smart);
    expect(await lower(ws.liveKey)).toBe(eoa);

    // Live's own choice is live's; the sandbox switching back does not touch it.
    expect((await call("PATCH", url(ws), ws.liveKey, { defaultWalletType: "smart_wallet" })).statusCode).toBe(
      200,
    );
    expect((await call("PATCH", url(ws), ws.testKey, { defaultWalletType: "workspace" })).statusCode).toBe(
      200,
    );
    expect(await lower(ws.liveKey)).toBe(smart);
    expect(await lower(ws.testKey)).toBe(eoa);
    // Only whether the node answers (one probe, kept for seconds: chain/network-health.ts).
    expect(
      rpc.methods.filter((method) => method !== "eth_getBlockByNumber"),
      "a payment read the chain",
    ).toEqual([]);
  });

  it("a sandbox payout without walletType is sent from the sandbox's default wallet", async () => {
    const ws = await withSmartWallet();
    for (const [walletType, address] of [
      ["eoa", ws.eoaAddress],
      ["smart_wallet", ws.smartWallet],
    ] as const) {
      const faucet = await t.request({
        method: "POST",
        url: "/api/v1/sandbox/faucet",
        headers: bearer(ws.testKey),
        payload: { tokenSymbol: "USDC", amount: "10", walletType },
      });
      expect(faucet.statusCode, faucet.body).toBe(200);
      expect(faucet.json().address.toLowerCase()).toBe(address.toLowerCase());
    }
    const payout = async () => {
      const res = await t.request({
        method: "POST",
        url: "/api/v1/payouts",
        headers: bearer(ws.testKey),
        payload: {
          tokenSymbol: "USDC",
          amount: "1",
          destinationAddress: "0x4444444444444444444444444444444444444444",
        },
      });
      expect(res.statusCode, res.body).toBe(200);
      return (res.json() as { payout: Json }).payout;
    };
    expect((await payout()).fromAddress).toBe(ws.eoaAddress);
    expect((await call("PATCH", url(ws), ws.testKey, { defaultWalletType: "smart_wallet" })).statusCode).toBe(
      200,
    );
    expect((await payout()).fromAddress).toBe(ws.smartWallet);
    // Live's default was never touched.
    expect((await defaults(ws)).live).toBe("workspace");
  });

  it("the faucet and a simulated incoming transfer without walletType reach the sandbox's default wallet", async () => {
    const ws = await withSmartWallet();
    const credit = async (url: string) => {
      const res = await t.request({
        method: "POST",
        url,
        headers: bearer(ws.testKey),
        payload: { tokenSymbol: "USDC", amount: "2" },
      });
      expect(res.statusCode, res.body).toBeLessThan(300);
      return res.json();
    };
    const faucetBefore = await credit("/api/v1/sandbox/faucet");
    expect(faucetBefore).toMatchObject({ walletType: "eoa" });
    expect(faucetBefore.address.toLowerCase()).toBe(ws.eoaAddress.toLowerCase());
    expect((await call("PATCH", url(ws), ws.testKey, { defaultWalletType: "smart_wallet" })).statusCode).toBe(
      200,
    );
    const faucetAfter = await credit("/api/v1/sandbox/faucet");
    expect(faucetAfter).toMatchObject({ walletType: "smart_wallet" });
    expect(faucetAfter.address.toLowerCase()).toBe(ws.smartWallet.toLowerCase());
    const incoming = await credit("/api/v1/sandbox/incoming-transfer");
    expect(incoming.transfer.to.toLowerCase()).toBe(ws.smartWallet.toLowerCase());
  });
});

describe("migration 027", () => {
  it("gives both environments the workspace's one default of before", async () => {
    const { db, close } = await openDatabase({});
    try {
      expect((await migratorUpTo(db, "025_onramp_reconcile").migrateToLatest()).error).toBeUndefined();
      await sql`
        INSERT INTO workspaces (name, default_wallet_type)
        VALUES ('smart before', 'smart_wallet'), ('eoa before', 'workspace')`.execute(db);
      expect(
        (await migratorUpTo(db, "027_default_wallet_per_environment").migrateToLatest()).error,
      ).toBeUndefined();
      const rows = await db
        .selectFrom("workspaces")
        .select(["name", "sandbox_default_wallet_type", "live_default_wallet_type"])
        .orderBy("name")
        .execute();
      expect(rows).toEqual([
        {
          name: "eoa before",
          sandbox_default_wallet_type: "workspace",
          live_default_wallet_type: "workspace",
        },
        {
          name: "smart before",
          sandbox_default_wallet_type: "smart_wallet",
          live_default_wallet_type: "smart_wallet",
        },
      ]);
      // Each is checked like the column it replaces.
      await expect(
        sql`UPDATE workspaces SET sandbox_default_wallet_type = 'eoa'`.execute(db),
      ).rejects.toThrow();
    } finally {
      await close();
    }
  });
});
