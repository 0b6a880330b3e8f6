import { describe, expect, it } from "vitest";
import {
  FAILURE_ADDRESS,
  failing,
  faucet,
  get,
  ISO,
  type Json,
  ledgerBalance,
  newWorkspace,
  outbox,
  payout,
  payoutRows,
  post,
  randomAddress,
  useSandboxPayoutsApp,
} from "../support/sandbox-payouts.ts";

// Sandbox payout events, payout history and wallet stats; the payouts themselves: sandbox.test.ts;
// shared helpers: support/sandbox-payouts.ts.

useSandboxPayoutsApp();

describe("sandbox payout events (part 6)", () => {
  it("payout.completed carries the payout; payout.failed adds error and failStreak", async () => {
    const ws = await newWorkspace();
    await faucet(ws, "USDC", "100");
    const destination = randomAddress();
    const ok = await payout(ws.testKey, {
      tokenSymbol: "USDC",
      amount: "12.5",
      destinationAddress: destination,
      description: "Weekly payout",
      metadata: { batch: "7" },
    });
    expect(ok.statusCode, ok.body).toBe(200);
    const completed = await outbox(ws, "payout.completed");
    expect(completed).toHaveLength(1);
    expect(completed[0]?.environment).toBe("sandbox");
    expect(completed[0]?.payload).toEqual({
      txHash: ok.json().payout.txHash,
      amount: "12.50",
      tokenSymbol: "USDC",
      network: "sandbox-a",
      destinationAddress: destination,
      fromAddress: ws.eoaAddress,
      environment: "sandbox",
      status: "completed",
      description: "Weekly payout",
      metadata: { batch: "7" },
    });

    const bad = await payout(ws.testKey, { ...failing("2"), description: "Doomed" });
    expect(bad.statusCode, bad.body).toBe(500);
    const failed = await outbox(ws, "payout.failed");
    expect(failed).toHaveLength(1);
    expect(failed[0]?.environment).toBe("sandbox");
    expect(failed[0]?.payload).toMatchObject({
      amount: "2.00",
      tokenSymbol: "USDC",
      destinationAddress: FAILURE_ADDRESS,
      fromAddress: ws.eoaAddress,
      environment: "sandbox",
      status: "failed",
      description: "Doomed",
      metadata: {},
      error: expect.any(String),
      failStreak: 1,
    });
    expect(failed[0]?.payload).toHaveProperty("txHash");
    // Exactly one completed event: the failure emitted none.
    expect(await outbox(ws, "payout.completed")).toHaveLength(1);
  });

  it("payouts of several workspaces sent together each get their own row, answer and event", async () => {
    // Recorded and completed by shared statements: nothing of one may land on another.
    const workspaces = await Promise.all([1, 2, 3, 4].map(() => newWorkspace()));
    await Promise.all(workspaces.map((ws) => faucet(ws, "USDC", "100")));
    const sent = workspaces.flatMap((ws, w) =>
      [1, 2, 3].map((n) => ({
        ws,
        body: {
          tokenSymbol: "USDC",
          amount: `${w + 1}.${n}`,
          destinationAddress: randomAddress(),
          description: `ws ${w} payout ${n}`,
          idempotencyKey: `together-${w}-${n}`,
        },
      })),
    );
    const answers = await Promise.all(sent.map(({ ws, body }) => payout(ws.testKey, body)));
    for (const [i, answer] of answers.entries()) {
      const { ws, body } = sent[i] as (typeof sent)[number];
      expect(answer.statusCode, answer.body).toBe(200);
      expect(answer.json().payout).toMatchObject({
        amount: `${body.amount}0`,
        destinationAddress: body.destinationAddress,
        description: body.description,
        fromAddress: ws.eoaAddress,
        status: "completed",
      });
    }
    for (const ws of workspaces) {
      const mine = sent.filter((item) => item.ws === ws);
      const rows = await payoutRows(ws);
      expect(rows).toHaveLength(3);
      expect(rows.every((row) => row.status === "completed")).toBe(true);
      const events = await outbox(ws, "payout.completed");
      expect(events.map((e) => (e.payload as Json).description).sort()).toEqual(
        mine.map((item) => item.body.description).sort(),
      );
      for (const event of events) {
        const payload = event.payload as Json;
        const answer = answers[sent.findIndex((item) => item.body.description === payload.description)];
        expect(payload.txHash).toBe(answer?.json().payout.txHash);
        expect(payload.destinationAddress).toBe(
          mine.find((item) => item.body.description === payload.description)?.body.destinationAddress,
        );
      }
      // Amounts are "<w>.<n>" USDC: w whole USDC and n tenths, in 6-decimal units.
      const paid = mine.reduce((sum, item) => {
        const [whole, tenths] = item.body.amount.split(".");
        return sum + BigInt(whole ?? "0") * 1_000_000n + BigInt(tenths ?? "0") * 100_000n;
      }, 0n);
      expect(await ledgerBalance(ws.eoaAddress, "USDC")).toBe(100_000_000n - paid);
    }
  });
});

describe("payout history and wallet stats", () => {
  it("GET /api/v1/payouts lists completed payouts only, with paging", async () => {
    const ws = await newWorkspace();
    await faucet(ws, "USDC", "100");
    await faucet(ws, "ETH", "1");
    const destination = randomAddress();
    const sent: string[] = [];
    for (const body of [
      { tokenSymbol: "USDC", amount: "1", destinationAddress: destination, description: "first" },
      { tokenSymbol: "ETH", amount: "0.25", destinationAddress: destination },
      { tokenSymbol: "USDC", amount: "3.5", destinationAddress: destination, description: "third" },
    ]) {
      const res = await payout(ws.testKey, body);
      expect(res.statusCode, res.body).toBe(200);
      sent.push(res.json().payout.txHash);
    }
    expect((await payout(ws.testKey, failing())).statusCode).toBe(500);

    const res = await get(ws.testKey, "/api/v1/payouts");
    expect(res.statusCode, res.body).toBe(200);
    const page = res.json();
    expect(page).toMatchObject({ total: 3, limit: 50, offset: 0 });
    expect(page.payouts).toHaveLength(3);
    const byHash = new Map<string, Json>(page.payouts.map((p: Json) => [p.txHash as string, p]));
    expect([...byHash.keys()].sort()).toEqual([...sent].sort());
    expect(byHash.get(sent[0] as string)).toEqual({
      txHash: sent[0],
      type: "ERC20",
      details: { amount: "1.00", tokenSymbol: "USDC", destinationAddress: destination, description: "first" },
      createdAt: expect.stringMatching(ISO),
    });
    expect(byHash.get(sent[1] as string)).toMatchObject({
      txHash: sent[1],
      type: "ETH",
      details: { amount: "0.25", tokenSymbol: "ETH", destinationAddress: destination },
      createdAt: expect.stringMatching(ISO),
    });
    expect(byHash.get(sent[2] as string)).toMatchObject({
      type: "ERC20",
      details: { amount: "3.50", tokenSymbol: "USDC", description: "third" },
    });

    const first = await get(ws.testKey, "/api/v1/payouts?limit=2");
    expect(first.json()).toMatchObject({ total: 3, limit: 2, offset: 0 });
    expect(first.json().payouts).toHaveLength(2);
    const second = await get(ws.testKey, "/api/v1/payouts?limit=2&offset=2");
    expect(second.json()).toMatchObject({ total: 3, limit: 2, offset: 2 });
    expect(second.json().payouts).toHaveLength(1);
    const paged = [...first.json().payouts, ...second.json().payouts].map((p: Json) => p.txHash);
    expect(new Set(paged).size).toBe(3);
    expect([...paged].sort()).toEqual([...sent].sort());
    const beyond = await get(ws.testKey, "/api/v1/payouts?offset=10");
    expect(beyond.json()).toMatchObject({ payouts: [], total: 3, offset: 10 });

    for (const query of ["limit=0", "limit=101", "offset=-1", "limit=abc"]) {
      const bad = await get(ws.testKey, `/api/v1/payouts?${query}`);
      expect(bad.statusCode, `${query}: ${bad.body}`).toBe(400);
      expect(typeof bad.json().error).toBe("string");
    }

    // Another workspace and the live environment see none of them.
    const other = await newWorkspace();
    expect((await get(other.testKey, "/api/v1/payouts")).json()).toMatchObject({ payouts: [], total: 0 });
    expect((await get(ws.liveKey, "/api/v1/payouts")).json()).toMatchObject({ payouts: [], total: 0 });
  });

  it("GET /api/v1/wallet/stats aggregates the workspace's payouts and payments", async () => {
    const ws = await newWorkspace();
    await faucet(ws, "USDC", "100");
    for (const amount of ["5", "10"]) {
      const res = await payout(ws.testKey, {
        tokenSymbol: "USDC",
        amount,
        destinationAddress: randomAddress(),
      });
      expect(res.statusCode, res.body).toBe(200);
    }
    expect((await payout(ws.testKey, failing("2"))).statusCode).toBe(500);
    const payment = await post(ws.testKey, "/api/v1/payments", {
      tokenSymbol: "USDC",
      amount: "40",
      merchantWallet: randomAddress(),
    });
    expect(payment.statusCode, payment.body).toBe(201);

    const res = await get(ws.testKey, "/api/v1/wallet/stats");
    expect(res.statusCode, res.body).toBe(200);
    const stats = res.json();
    expect(stats.environment).toBe("sandbox");
    expect(stats.payouts).toEqual(
      expect.arrayContaining([
        { status: "completed", tokenSymbol: "USDC", count: 2, volume: "15.00" },
        { status: "failed", tokenSymbol: "USDC", count: 1, volume: "2.00" },
      ]),
    );
    expect(stats.payments).toEqual([{ status: "forwarded", tokenSymbol: "USDC", count: 1, volume: "40.00" }]);

    const other = await newWorkspace();
    const empty = await get(other.testKey, "/api/v1/wallet/stats");
    expect(empty.json()).toMatchObject({ environment: "sandbox", payouts: [], payments: [] });
  });
});
