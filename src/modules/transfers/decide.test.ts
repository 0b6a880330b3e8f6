import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createWorkspace, startTestApp, type TestApp } from "../../../test/support/app.ts";
import { AUTO_RESUME_AFTER_MS, type BreakerState } from "../../domain/circuit-breaker.ts";
import { InvalidRequest, Unavailable } from "../../domain/errors.ts";
import * as breakers from "./breaker-repo.ts";
import { TransferDecisions } from "./decide.ts";
import type { Scope } from "./repo.ts";

// The decide step (decide.ts) on the real app and database: the circuit breaker as stored in
// payout_breakers (with its auto-resume written back), the wallet and rail a transfer leaves
// from, and the refusal of an environment without a network.

let t: TestApp;
let decisions: TransferDecisions;

beforeAll(async () => {
  t = await startTestApp();
  decisions = new TransferDecisions(t.app.ctx, t.app.rails);
});
afterAll(async () => t.close());

async function sandboxScope(): Promise<{ scope: Scope; eoaAddress: string; id: string }> {
  const ws = await createWorkspace(t);
  return { scope: { workspaceId: ws.id, environment: "sandbox" }, eoaAddress: ws.eoaAddress, id: ws.id };
}

/** Stores `state` as the scope's breaker, the way finish.ts writes one: locked, in a transaction. */
async function storeBreaker(scope: Scope, state: BreakerState): Promise<void> {
  await t.database.db.transaction().execute(async (trx) => {
    await breakers.lockBreaker(trx, scope);
    await breakers.writeBreaker(trx, scope, state);
  });
}

const later = (from: Date, ms: number) => new Date(from.getTime() + ms);

describe("TransferDecisions.breaker", () => {
  it("allows a fresh workspace with failStreak 0, and writes no breaker row for it", async () => {
    const { scope } = await sandboxScope();
    expect(await decisions.breaker(scope, new Date())).toEqual({ allowed: true, failStreak: 0 });
    const rows = await t.database.db
      .selectFrom("payout_breakers")
      .select(["workspace_id", "environment"])
      .where("workspace_id", "=", scope.workspaceId)
      .execute();
    expect(rows).toEqual([]);
  });

  it("allows an active breaker with the streak it has counted", async () => {
    const { scope } = await sandboxScope();
    await storeBreaker(scope, { status: "active", failStreak: 2, pausedAt: null, reason: "reverted" });
    expect(await decisions.breaker(scope, new Date())).toEqual({ allowed: true, failStreak: 2 });
  });

  it("refuses while paused, with the stored state", async () => {
    const { scope } = await sandboxScope();
    const pausedAt = new Date("2025-01-01T12:00:00.000Z");
    const paused: BreakerState = { status: "paused", failStreak: 3, pausedAt, reason: "reverted" };
    await storeBreaker(scope, paused);
    expect(await decisions.breaker(scope, pausedAt)).toEqual({ allowed: false, state: paused });
    // One millisecond short of the 30 minutes: still paused, and still stored so.
    expect(await decisions.breaker(scope, later(pausedAt, AUTO_RESUME_AFTER_MS - 1))).toEqual({
      allowed: false,
      state: paused,
    });
    expect(await breakers.readBreaker(t.database.db, scope)).toEqual(paused);
  });

  it("auto-resumes 30 minutes after pausedAt: allowed with streak 0, and stored active again", async () => {
    const { scope } = await sandboxScope();
    const pausedAt = new Date("2025-01-01T12:00:00.000Z");
    await storeBreaker(scope, { status: "paused", failStreak: 3, pausedAt, reason: "reverted" });
    expect(AUTO_RESUME_AFTER_MS).toBe(30 * 60 * 1000);
    expect(await decisions.breaker(scope, later(pausedAt, AUTO_RESUME_AFTER_MS))).toEqual({
      allowed: true,
      failStreak: 0,
    });
    expect(await breakers.readBreaker(t.database.db, scope)).toEqual({
      status: "active",
      failStreak: 0,
      pausedAt: null,
      reason: null,
    });
  });

  it("keeps one workspace's pause to itself", async () => {
    const a = await sandboxScope();
    const b = await sandboxScope();
    const now = new Date();
    await storeBreaker(a.scope, { status: "paused", failStreak: 3, pausedAt: now, reason: "x" });
    // Asked together: the coalesced read answers each key with its own row.
    const [decidedA, decidedB, decidedLive] = await Promise.all([
      decisions.breaker(a.scope, now),
      decisions.breaker(b.scope, now),
      decisions.breaker({ ...a.scope, environment: "live" }, now),
    ]);
    expect(decidedA.allowed).toBe(false);
    expect(decidedB).toEqual({ allowed: true, failStreak: 0 });
    expect(decidedLive).toEqual({ allowed: true, failStreak: 0 });
  });
});

describe("TransferDecisions.wallet", () => {
  it("picks the sandbox EOA rail and the workspace's EOA by default", async () => {
    const { scope, eoaAddress, id } = await sandboxScope();
    const profile = await t.app.services.workspaces.profile(id);
    const choice = decisions.wallet(scope, null, null, profile);
    expect(choice.walletType).toBe("eoa");
    expect(choice.rail).toBe(t.app.rails.of("sandbox", null)?.eoa);
    expect(choice.from.toLowerCase()).toBe(eoaAddress.toLowerCase());
    expect(choice.owner.toLowerCase()).toBe(eoaAddress.toLowerCase());
    expect(decisions.wallet(scope, null, "eoa", profile)).toEqual(choice);
  });

  it("refuses a smart_wallet request, asked or by default, when the workspace has no smart wallet", async () => {
    const { scope, id } = await sandboxScope();
    const profile = await t.app.services.workspaces.profile(id);
    expect(profile.smartWalletAddress).toBeNull();
    expect(() => decisions.wallet(scope, null, "smart_wallet", profile)).toThrow(InvalidRequest);
    expect(() => decisions.wallet(scope, null, "smart_wallet", profile)).toThrow(
      /No smart wallet for this workspace/,
    );
    const smartByDefault = {
      ...profile,
      defaultWalletTypes: { ...profile.defaultWalletTypes, sandbox: "smart_wallet" as const },
    };
    expect(() => decisions.wallet(scope, null, null, smartByDefault)).toThrow(InvalidRequest);
  });

  it("sends a smart wallet's transfer from the smart wallet, signed by its EOA owner", async () => {
    const { scope, eoaAddress, id } = await sandboxScope();
    const smart = "0x4444444444444444444444444444444444444444";
    const profile = { ...(await t.app.services.workspaces.profile(id)), smartWalletAddress: smart };
    const choice = decisions.wallet(scope, null, "smart_wallet", profile);
    expect(choice.walletType).toBe("smart_wallet");
    expect(choice.rail).toBe(t.app.rails.of("sandbox", null)?.smart_wallet);
    expect(choice.rail).not.toBe(t.app.rails.of("sandbox", null)?.eoa);
    expect(choice.from).toBe(smart);
    expect(choice.owner.toLowerCase()).toBe(eoaAddress.toLowerCase());
  });

  it("refuses a workspace without an EOA", async () => {
    const { scope, id } = await sandboxScope();
    const profile = { ...(await t.app.services.workspaces.profile(id)), eoaAddress: null };
    expect(() => decisions.wallet(scope, null, null, profile)).toThrow(
      "No workspace wallet found. Provision a wallet first.",
    );
  });
});

describe("TransferDecisions.assertConfigured", () => {
  it("throws Unavailable for live when no live network is configured, and passes the sandbox", async () => {
    const { id } = await sandboxScope();
    // startTestApp's default configuration has no network at all: the sandbox runs on the ledger.
    expect(t.config.networks.live).toEqual([]);
    expect(t.app.rails.of("live", null)).toBeUndefined();
    expect(() => decisions.assertConfigured({ workspaceId: id, environment: "live" })).toThrow(Unavailable);
    expect(() => decisions.assertConfigured({ workspaceId: id, environment: "live" })).toThrow(
      "Live network is not configured",
    );
    expect(() => decisions.assertConfigured({ workspaceId: id, environment: "sandbox" })).not.toThrow();
  });
});
