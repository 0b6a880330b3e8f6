import type { LightMyRequestResponse } from "fastify";
import { sql } from "kysely";
import { describe, expect, it } from "vitest";
import { expectSignedFor, paymentRequired, RESOURCE, requirement } from "../support/agent-payments.ts";
import { bearer, type CreatedWorkspace, createWorkspace, type TestApp } from "../support/app.ts";
import { type Instances, useInstances } from "../support/instances.ts";

// An agent wallet's caps under concurrency (issue 40, D23): the reservation is taken in the
// database, under the wallet's row lock, so 20 payments racing against a daily cap of 7 payments'
// worth sign exactly 7, however many instances answer them. Each scenario runs on one app instance,
// then on two that share one database (on PostgreSQL with DATABASE_URL: a connection pool each).

type Json = Record<string, unknown>;

const RACERS = 20;
const ENV = { RATE_LIMIT_SANDBOX: "100000", RATE_LIMIT_LIVE: "100000" };

const setups = useInstances(ENV);

function send(app: TestApp, key: string, method: "GET" | "POST" | "PUT", url: string, payload?: Json) {
  return app.request({ method, url, headers: bearer(key), ...(payload === undefined ? {} : { payload }) });
}

async function agentWallet(app: TestApp, ws: CreatedWorkspace, policy: Json): Promise<Json> {
  const agent = await send(app, ws.testKey, "POST", "/api/agents/create", { name: "Racing agent" });
  expect(agent.statusCode, agent.body).toBe(201);
  const wallet = await send(app, ws.testKey, "POST", "/api/wallets/create", {
    ownerId: agent.json().data.agentId,
    type: "agent",
    currencies: ["USDC"],
  });
  expect(wallet.statusCode, wallet.body).toBe(201);
  const data = wallet.json().data as Json;
  const put = await send(app, ws.testKey, "PUT", `/api/wallets/${data.walletId}/policy`, policy);
  expect(put.statusCode, put.body).toBe(200);
  return data;
}

function race(
  { a, b }: Instances,
  request: (app: TestApp, i: number) => Promise<LightMyRequestResponse>,
): Promise<LightMyRequestResponse[]> {
  return Promise.all(Array.from({ length: RACERS }, (_, i) => request(i % 2 === 0 ? a : b, i)));
}

async function stored(
  app: TestApp,
  walletId: unknown,
): Promise<Record<string, { count: number; sum: bigint }>> {
  const { rows } = await sql<{ status: string; count: string; sum: string }>`
    SELECT status, count(*)::text AS count, sum(amount)::text AS sum
    FROM agent_payment_authorizations WHERE wallet_id = ${walletId} GROUP BY status`.execute(app.database.db);
  return Object.fromEntries(rows.map((r) => [r.status, { count: Number(r.count), sum: BigInt(r.sum) }]));
}

const pay1_50 = { paymentRequired: paymentRequired(requirement({ amount: "1500000" })), resource: RESOURCE };

describe.each([
  { index: 0, label: "one app instance" },
  { index: 1, label: "two app instances on one database" },
])("$label", ({ index }) => {
  const setup = () => setups[index] as Instances;

  it(`${RACERS} concurrent payments of 1.50 against a daily cap of 10.50: exactly 7 are signed, 13 refused by "daily"`, async () => {
    const s = setup();
    const ws = await createWorkspace(s.a);
    const wallet = await agentWallet(s.a, ws, { daily: { USDC: "10.50" } });
    const answers = await race(s, (app) =>
      send(app, ws.testKey, "POST", `/api/wallets/${wallet.walletId}/x402/pay`, pay1_50),
    );

    const signed = answers.filter((res) => res.statusCode === 200);
    const refused = answers.filter((res) => res.statusCode !== 200);
    expect(signed, s.name).toHaveLength(7);
    for (const res of refused) {
      expect(res.statusCode, res.body).toBe(403);
      expect(res.json()).toMatchObject({ success: false, policy: "daily" });
    }
    const nonces = new Set<string>();
    for (const res of signed) {
      const { authorization } = await expectSignedFor(
        res.json().data.paymentSignature,
        String(wallet.address),
        requirement({ amount: "1500000" }),
      );
      nonces.add(authorization.nonce);
    }
    expect(nonces.size, "each authorization has its own nonce").toBe(7);
    expect(await stored(s.b, wallet.walletId)).toEqual({ authorized: { count: 7, sum: 10_500_000n } });
    const events = await s.a.database.db
      .selectFrom("outbox_events")
      .select("payload")
      .where("workspace_id", "=", ws.id)
      .where("event_type", "=", "agent.payment.authorized")
      .execute();
    expect(events).toHaveLength(7);
  });

  it(`${RACERS} concurrent payments above approvalAbove: each waiting one is reserved, so exactly 7 wait and 13 are refused`, async () => {
    const s = setup();
    const ws = await createWorkspace(s.a);
    const wallet = await agentWallet(s.a, ws, { daily: { USDC: "10.50" }, approvalAbove: { USDC: "1" } });
    const answers = await race(s, (app) =>
      send(app, ws.testKey, "POST", `/api/wallets/${wallet.walletId}/x402/pay`, pay1_50),
    );
    expect(
      answers.filter((res) => res.statusCode === 202),
      s.name,
    ).toHaveLength(7);
    expect(answers.filter((res) => res.statusCode === 403 && res.json().policy === "daily")).toHaveLength(13);
    expect(await stored(s.a, wallet.walletId)).toEqual({ approval_required: { count: 7, sum: 10_500_000n } });

    // Approved from both instances at once, one authorization is signed once: the rest answer 409.
    const waiting = answers.find((res) => res.statusCode === 202)?.json().data.authorizationId;
    const approvals = await race(s, (app) =>
      send(app, ws.testKey, "POST", `/api/wallets/${wallet.walletId}/x402/authorizations/${waiting}/approve`),
    );
    expect(approvals.filter((res) => res.statusCode === 200)).toHaveLength(1);
    for (const res of approvals.filter((r) => r.statusCode !== 200)) {
      expect(res.statusCode, res.body).toBe(409);
      expect(res.json()).toMatchObject({ success: false, currentStatus: "authorized" });
    }
    expect(await stored(s.b, wallet.walletId)).toEqual({
      approval_required: { count: 6, sum: 9_000_000n },
      authorized: { count: 1, sum: 1_500_000n },
    });
  });
});
