import { randomUUID } from "node:crypto";
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type CreatedWorkspace, startTestApp, type TestApp } from "../../../test/support/app.ts";
import { newPayout } from "../../../test/support/payout-rows.ts";
import { fundedWorkspace, randomAddress } from "../../../test/support/transfers.ts";
import type { Hex } from "../../chain/network.ts";
import { UNMATCHED_REASON } from "../payments/inbox/unmatched-repo.ts";
import type { NewTransfer } from "./repo.ts";
import { type HeldInbox, recordSandboxPayouts, type SandboxPayout } from "./sandbox-repo.ts";

// The sandbox payouts' one statement (sandbox-repo.ts) on a real database: what a wallet's open
// inbox transfers hold is read by the statement itself (the payments module's SQL), per wallet,
// token and network, and a return may spend the transfer it sends back.

let t: TestApp;
let held: HeldInbox;

beforeAll(async () => {
  t = await startTestApp();
  const { payments } = t.app.services;
  held = (of) => payments.openInboxHeld(of);
});
afterAll(async () => t.close());

function payoutOf(
  ws: CreatedWorkspace,
  amount: bigint,
  extra: Partial<NewTransfer> & { token?: "USDC" | "ADAO" } = {},
): SandboxPayout {
  const to = randomAddress();
  const { token = "USDC", ...fields } = extra;
  const payout = {
    ...newPayout(ws, "sandbox", { idempotencyKey: null, amount, destinationAddress: to }),
    tokenSymbol: token,
    ...fields,
  };
  return {
    ...payout,
    transfer: {
      network: payout.network,
      from: ws.eoaAddress as Hex,
      to: to as Hex,
      token,
      amount,
      reference: `payout:${payout.id}`,
    },
    userOpHash: null,
    completedAt: new Date(),
    requestHash: "",
    event: null,
    payload: {},
  };
}

/** An inbox transfer that reached `ws`'s EOA (the address in another case, as a watcher may store it). */
async function stray(
  ws: CreatedWorkspace,
  amount: bigint,
  options: { token?: string; network?: string; status?: string } = {},
): Promise<string> {
  const { rows } = await sql<{ id: string }>`
    INSERT INTO unmatched_transfers (workspace_id, environment, network, token_symbol, amount, from_address,
                                     to_address, tx_hash, log_index, block_number, reason, status)
    VALUES (${ws.id}, 'sandbox', ${options.network ?? "sandbox-a"}, ${options.token ?? "USDC"}, ${amount},
            ${randomAddress()}, ${ws.eoaAddress.toUpperCase().replace("0X", "0x")},
            ${`0x${randomUUID().replaceAll("-", "").padEnd(64, "0")}`}, 0, 1, ${UNMATCHED_REASON},
            ${options.status ?? "open"})
    RETURNING id`.execute(t.database.db);
  const id = rows[0]?.id;
  if (!id) throw new Error("no inbox transfer inserted");
  return id;
}

const outcomes = (results: Awaited<ReturnType<typeof recordSandboxPayouts>>) =>
  results.map((r) => (r.outcome === "insufficient" ? `insufficient ${r.balance}` : r.outcome));

describe("recordSandboxPayouts: the money open inbox transfers hold", () => {
  it("is left on each wallet of one statement, counted per token and network, not once attached", async () => {
    const [a, b] = [await fundedWorkspace(t, 10n), await fundedWorkspace(t, 10n)];
    await stray(a, 4n);
    // Not held from a USDC payout on sandbox-a: another token, another network, one attached.
    await stray(a, 100n, { token: "ADAO" });
    await stray(a, 100n, { network: "sandbox-b" });
    await stray(a, 100n, { status: "attached" });
    await stray(b, 3n);
    await stray(b, 5n);

    // One statement: a may spend 10 − 4, b 10 − 8.
    expect(
      outcomes(await recordSandboxPayouts(t.database.db, [payoutOf(a, 7n), payoutOf(b, 2n)], held)),
    ).toEqual(["insufficient 6", "success"]);
    expect(
      outcomes(await recordSandboxPayouts(t.database.db, [payoutOf(a, 6n), payoutOf(b, 1n)], held)),
    ).toEqual(["success", "insufficient 0"]);
  });

  it("is read by the statement itself: nothing read before it is needed", async () => {
    const ws = await fundedWorkspace(t, 10n);
    const before = await t.app.services.payments.openInboxOn(
      { environment: "sandbox", id: "sandbox-a" },
      ws.eoaAddress,
    );
    expect(before).toEqual([]);
    await stray(ws, 10n);
    expect(outcomes(await recordSandboxPayouts(t.database.db, [payoutOf(ws, 1n)], held))).toEqual([
      "insufficient 0",
    ]);
  });

  it("a return spends the transfer it sends back, and only that one", async () => {
    const ws = await fundedWorkspace(t, 0n);
    const returned = await stray(ws, 5n);
    await stray(ws, 2n);
    // The money is on the wallet as the inbox transfers credited it.
    await t.app.services.ledger.credit({
      network: "sandbox-a",
      address: ws.eoaAddress,
      token: "USDC",
      amount: 7n,
      reference: `test-credit:${randomUUID()}`,
    });
    const back = (amount: bigint) =>
      payoutOf(ws, amount, {
        kind: "return",
        unmatchedTransferId: returned,
        reason: "returned to its sender",
      });
    expect(outcomes(await recordSandboxPayouts(t.database.db, [back(6n)], held))).toEqual(["insufficient 5"]);
    expect(outcomes(await recordSandboxPayouts(t.database.db, [back(5n)], held))).toEqual(["success"]);
  });
});
