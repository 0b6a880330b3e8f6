import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { claimSettle, finishSettle } from "../../src/modules/x402/repo.ts";
import { type CreatedWorkspace, createWorkspace, startTestApp, type TestApp } from "../support/app.ts";

// The x402 settle claim's statuses go by its transition table (domain/x402-settle-state.ts): a
// claim is settling, then ends once; a second end is refused by the compare-and-set and leaves the
// recorded answer as it was; a failed claim frees its authorization for a new one.

let t: TestApp;
let ws: CreatedWorkspace;

beforeAll(async () => {
  t = await startTestApp();
  ws = await createWorkspace(t, { name: "Claims Co" });
});

afterAll(async () => {
  await t?.close();
});

const claim = (nonce: string, identifier: string | null = null) =>
  claimSettle(t.database.db, {
    workspaceId: ws.id,
    environment: "sandbox",
    network: "sandbox-a",
    asset: `0x${"A".repeat(40)}`,
    payer: `0x${"B".repeat(40)}`,
    nonce,
    identifier,
    fingerprint: `fp-${nonce}`,
  });

async function rowOf(id: string) {
  const found = await sql<{ status: string; response: unknown }>`
    SELECT status, response FROM x402_settlements WHERE id = ${id}`.execute(t.database.db);
  return found.rows[0];
}

describe("an x402 settle claim", () => {
  it("ends once: a second end is refused and changes nothing", async () => {
    const claimed = await claim(`0x${"1".repeat(64)}`);
    if (claimed.kind !== "claimed") throw new Error("not claimed");
    expect((await rowOf(claimed.id))?.status).toBe("settling");
    const at = new Date();
    expect(await finishSettle(t.database.db, claimed.id, "succeeded", { success: true }, at, null)).toBe(
      true,
    );
    expect(await finishSettle(t.database.db, claimed.id, "failed", { error: "late" }, at, null)).toBe(false);
    expect(await rowOf(claimed.id)).toEqual({ status: "settled", response: { success: true } });
  });

  it("failed, frees its authorization: the next settle of it claims it afresh", async () => {
    const nonce = `0x${"2".repeat(64)}`;
    const first = await claim(nonce);
    if (first.kind !== "claimed") throw new Error("not claimed");
    expect((await claim(nonce)).kind).toBe("earlier");
    expect(
      await finishSettle(t.database.db, first.id, "failed", { error: "reverted" }, new Date(), null),
    ).toBe(true);
    const again = await claim(nonce);
    expect(again.kind).toBe("claimed");
  });
});
