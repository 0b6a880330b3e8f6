import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { startTestApp } from "../support/app.ts";
import { headerOf } from "../support/mail-sink.ts";
import {
  eoaBalances,
  extraApps,
  failing,
  faucet,
  get,
  ISO,
  ledgerBalance,
  ledgerTransfersFrom,
  MSG,
  mail,
  newWorkspace,
  outbox,
  payout,
  payoutRows,
  payoutState,
  post,
  randomAddress,
  t,
  tempDir,
  tripBreaker,
  useSandboxPayoutsApp,
} from "../support/sandbox-payouts.ts";

// The sandbox circuit breaker of payouts; the rest of sandbox payouts: sandbox.test.ts,
// sandbox-events.test.ts; shared helpers: support/sandbox-payouts.ts.

useSandboxPayoutsApp();

describe("sandbox circuit breaker", () => {
  it("walks the breaker table: 500, 500, then 503 on the 3rd failure; paused payouts send nothing", async () => {
    const ws = await newWorkspace();
    await faucet(ws, "USDC", "100");
    expect(await payoutState(ws)).toEqual({ status: "active", failStreak: 0, pausedAt: null, reason: null });

    const first = await payout(ws.testKey, failing());
    expect(first.statusCode, first.body).toBe(500);
    expect(first.json()).toEqual({
      error: "Payout failed",
      code: "PAYOUT_FAILED",
      detail: expect.any(String),
      failStreak: 1,
      remainingBeforePause: 2,
      circuitBreaker: false,
    });
    expect(first.json().detail.length).toBeGreaterThan(0);
    expect(await payoutState(ws)).toMatchObject({ status: "active", failStreak: 1, pausedAt: null });

    const second = await payout(ws.testKey, failing());
    expect(second.statusCode, second.body).toBe(500);
    expect(second.json()).toEqual({
      error: "Payout failed",
      code: "PAYOUT_FAILED",
      detail: expect.any(String),
      failStreak: 2,
      remainingBeforePause: 1,
      circuitBreaker: false,
    });

    const third = await payout(ws.testKey, failing());
    expect(third.statusCode, third.body).toBe(503);
    const tripped = third.json();
    expect(tripped).toMatchObject({
      error: expect.any(String),
      code: "CIRCUIT_BREAKER_OPEN",
      circuitBreaker: true,
      detail: expect.any(String),
      remainingBeforePause: 0,
      failStreak: 3,
      pausedAt: expect.stringMatching(ISO),
      resumeAction: expect.any(String),
    });
    expect(tripped.resumeAction.length).toBeGreaterThan(0);

    const state = await payoutState(ws);
    expect(state).toEqual({
      status: "paused",
      failStreak: 3,
      pausedAt: tripped.pausedAt,
      reason: expect.any(String),
    });
    expect(await ledgerTransfersFrom(ws)).toHaveLength(3);

    // While paused every payout answers 503 without a transaction: a valid one, a failing one, and
    // one over the balance.
    for (const body of [
      { tokenSymbol: "USDC", amount: "10", destinationAddress: randomAddress() },
      failing(),
      { tokenSymbol: "USDC", amount: "1000", destinationAddress: randomAddress() },
    ]) {
      const res = await payout(ws.testKey, body);
      expect(res.statusCode, res.body).toBe(503);
      expect(res.json()).toMatchObject({
        error: expect.any(String),
        code: "CIRCUIT_BREAKER_OPEN",
        circuitBreaker: true,
        failStreak: 3,
        pausedAt: tripped.pausedAt,
        resumeAction: expect.any(String),
      });
    }
    const transfers = await ledgerTransfersFrom(ws);
    expect(transfers).toHaveLength(3);
    expect(transfers.every((tx) => tx.status !== "success")).toBe(true);
    expect((await eoaBalances(ws)).USDC).toBe("100.00");
    expect(await payoutState(ws)).toMatchObject({ status: "paused", failStreak: 3 });
    expect((await payoutRows(ws)).filter((p) => p.status === "completed")).toEqual([]);

    // The administrator got exactly one e-mail through SMTP.
    const mails = mail.to(ws.adminEmail);
    expect(mails).toHaveLength(1);
    expect(mails[0]?.subject).toMatch(/paused/i);
    expect(headerOf(mails[0]?.raw ?? "", "To")).toContain(ws.adminEmail);
  });

  it("10 concurrent failing payouts on a fresh workspace trip it exactly once", async () => {
    const ws = await newWorkspace();
    await faucet(ws, "USDC", "100");
    const responses = await Promise.all(Array.from({ length: 10 }, () => payout(ws.testKey, failing())));
    const statuses = responses.map((r) => r.statusCode).sort();
    expect(statuses).toEqual([500, 500, 503, 503, 503, 503, 503, 503, 503, 503]);
    for (const res of responses.filter((r) => r.statusCode === 503)) {
      expect(res.json()).toMatchObject({ code: "CIRCUIT_BREAKER_OPEN", circuitBreaker: true, failStreak: 3 });
    }
    expect(
      responses
        .filter((r) => r.statusCode === 500)
        .map((r) => r.json().failStreak)
        .sort(),
    ).toEqual([1, 2]);

    const attempts = await ledgerTransfersFrom(ws);
    expect(attempts).toHaveLength(3);
    expect(attempts.every((a) => a.status === "reverted")).toBe(true);
    const rows = await payoutRows(ws);
    expect(rows).toHaveLength(3);
    expect(rows.every((r) => r.status === "failed")).toBe(true);
    expect(await outbox(ws, "payout.failed")).toHaveLength(3);
    expect(await payoutState(ws)).toMatchObject({ status: "paused", failStreak: 3 });
    expect(mail.to(ws.adminEmail)).toHaveLength(1);
  });

  it("payout-state of another workspace is 403", async () => {
    const ws = await newWorkspace();
    const other = await newWorkspace();
    const res = await get(ws.testKey, `/api/v1/workspaces/${other.id}/payout-state`);
    expect(res.statusCode, res.body).toBe(403);
  });

  it("auto-resumes 30 minutes after the pause: 29 min still 503, 30 min the attempt runs", async () => {
    const ws = await newWorkspace();
    await faucet(ws, "USDC", "100");
    const pausedAt = new Date(Date.now() - 60 * 60_000);
    t.setNow(pausedAt);
    const tripped = await tripBreaker(ws);
    expect(tripped.pausedAt).toBe(pausedAt.toISOString());

    const destination = randomAddress();
    const body = { tokenSymbol: "USDC", amount: "10", destinationAddress: destination };
    t.setNow(new Date(pausedAt.getTime() + 29 * 60_000));
    const early = await payout(ws.testKey, body);
    expect(early.statusCode, early.body).toBe(503);
    expect(early.json().code).toBe("CIRCUIT_BREAKER_OPEN");
    expect(await ledgerBalance(destination, "USDC")).toBe(0n);

    t.setNow(new Date(pausedAt.getTime() + 30 * 60_000));
    const resumed = await payout(ws.testKey, body);
    expect(resumed.statusCode, resumed.body).toBe(200);
    expect(resumed.json().payout.status).toBe("completed");
    expect(await ledgerBalance(destination, "USDC")).toBe(10_000_000n);
    expect(await payoutState(ws)).toEqual({ status: "active", failStreak: 0, pausedAt: null, reason: null });
  });

  it("after 30 minutes a failing attempt is attempted again and starts a new streak", async () => {
    const ws = await newWorkspace();
    await faucet(ws, "USDC", "100");
    const pausedAt = new Date(Date.now() - 60 * 60_000);
    t.setNow(pausedAt);
    await tripBreaker(ws);
    t.setNow(new Date(pausedAt.getTime() + 31 * 60_000));
    const res = await payout(ws.testKey, failing());
    expect(res.statusCode, res.body).toBe(500);
    expect(res.json()).toMatchObject({
      code: "PAYOUT_FAILED",
      failStreak: 1,
      remainingBeforePause: 2,
      circuitBreaker: false,
    });
    expect(await ledgerTransfersFrom(ws)).toHaveLength(4);
    expect(await payoutState(ws)).toMatchObject({ status: "active", failStreak: 1 });
  });

  it("POST /workspaces/{id}/resume resumes a paused workspace; on an active one resumed is false", async () => {
    const ws = await newWorkspace();
    await faucet(ws, "USDC", "100");
    const tripped = await tripBreaker(ws);
    const state = await payoutState(ws);

    const res = await post(ws.testKey, `/api/v1/workspaces/${ws.id}/resume`);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toEqual({
      resumed: true,
      workspace: ws.name,
      previousStreak: 3,
      previousReason: state.reason,
    });
    expect(typeof res.json().previousReason).toBe("string");
    expect(tripped.detail).toBeDefined();
    expect(await payoutState(ws)).toEqual({ status: "active", failStreak: 0, pausedAt: null, reason: null });

    const destination = randomAddress();
    const ok = await payout(ws.testKey, {
      tokenSymbol: "USDC",
      amount: "5",
      destinationAddress: destination,
    });
    expect(ok.statusCode, ok.body).toBe(200);
    expect(await ledgerBalance(destination, "USDC")).toBe(5_000_000n);

    const again = await post(ws.testKey, `/api/v1/workspaces/${ws.id}/resume`);
    expect(again.statusCode, again.body).toBe(200);
    expect(again.json()).toMatchObject({ resumed: false, workspace: ws.name, previousStreak: 0 });
    expect(typeof again.json().previousReason).toBe("string");
  });

  it("resume with another workspace's id is 403 and changes nothing", async () => {
    const ws = await newWorkspace();
    await faucet(ws, "USDC", "100");
    await tripBreaker(ws);
    const other = await newWorkspace();
    const res = await post(other.testKey, `/api/v1/workspaces/${ws.id}/resume`);
    expect(res.statusCode, res.body).toBe(403);
    expect(await payoutState(ws)).toMatchObject({ status: "paused", failStreak: 3 });
  });

  it("a success resets the streak", async () => {
    const ws = await newWorkspace();
    await faucet(ws, "USDC", "100");
    for (const streak of [1, 2]) {
      const res = await payout(ws.testKey, failing());
      expect(res.json().failStreak).toBe(streak);
    }
    const ok = await payout(ws.testKey, {
      tokenSymbol: "USDC",
      amount: "1",
      destinationAddress: randomAddress(),
    });
    expect(ok.statusCode, ok.body).toBe(200);
    expect(await payoutState(ws)).toMatchObject({ status: "active", failStreak: 0 });
    const next = await payout(ws.testKey, failing());
    expect(next.statusCode, next.body).toBe(500);
    expect(next.json()).toMatchObject({ failStreak: 1, remainingBeforePause: 2, circuitBreaker: false });
    const after = await payout(ws.testKey, failing());
    expect(after.statusCode, after.body).toBe(500);
    expect(after.json().failStreak).toBe(2);
  });

  it("sandbox failures never pause live; resume with the live key leaves the sandbox paused", async () => {
    const ws = await newWorkspace();
    await faucet(ws, "USDC", "100");
    await tripBreaker(ws);
    expect(await payoutState(ws, ws.testKey)).toMatchObject({ status: "paused", failStreak: 3 });
    expect(await payoutState(ws, ws.liveKey)).toEqual({
      status: "active",
      failStreak: 0,
      pausedAt: null,
      reason: null,
    });
    // Live is not configured here: a live payout is refused for that reason, not by the breaker.
    const live = await payout(ws.liveKey, {
      tokenSymbol: "USDC",
      amount: "1",
      destinationAddress: randomAddress(),
    });
    expect(live.statusCode, live.body).toBe(503);
    expect(live.json()).toEqual({ error: MSG.liveNotConfigured });

    const resumeLive = await post(ws.liveKey, `/api/v1/workspaces/${ws.id}/resume`);
    expect(resumeLive.statusCode, resumeLive.body).toBe(200);
    expect(resumeLive.json()).toMatchObject({ resumed: false, previousStreak: 0 });
    expect(await payoutState(ws, ws.testKey)).toMatchObject({ status: "paused", failStreak: 3 });
  });

  it("without SMTP_URL the breaker e-mail is written as an .eml file under DATA_DIR/mail", async () => {
    const dataDir = tempDir();
    const local = await startTestApp({ DATA_DIR: dataDir, RATE_LIMIT_SANDBOX: "100000" });
    extraApps.push(local);
    const ws = await newWorkspace(local);
    await faucet(ws, "USDC", "100", local);
    await tripBreaker(ws, local);
    const folder = join(dataDir, "mail");
    const files = readdirSync(folder).filter((f) => f.endsWith(".eml"));
    expect(files).toHaveLength(1);
    const raw = readFileSync(join(folder, files[0] as string), "utf8");
    expect(headerOf(raw, "To")).toContain(ws.adminEmail);
    expect(headerOf(raw, "Subject")).toMatch(/paused/i);
    // Nothing went to the SMTP listener of the other app.
    expect(mail.to(ws.adminEmail)).toEqual([]);
  });
});
