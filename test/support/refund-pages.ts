import { expect } from "vitest";
import { SANDBOX_A } from "../../src/chain/simulated/networks.ts";
import type { CreatedWorkspace, TestApp } from "./app.ts";

// What the tests of the dashboard's refund and inbox pages (D19) share: a pending payment (sandbox
// creation settles at once, so it is written directly), and reading the pages' HTML.

/** A pending crypto payment of the workspace's sandbox (sandbox creation settles at once). */
export async function pendingPayment(
  t: TestApp,
  owner: CreatedWorkspace,
  grossUnits: string,
): Promise<string> {
  const now = new Date();
  const gross = BigInt(grossUnits);
  const fee = (gross * 150n) / 10000n;
  const row = await t.database.db
    .insertInto("payments")
    .values({
      workspace_id: owner.id,
      environment: "sandbox",
      network: SANDBOX_A.id,
      status: "pending",
      payment_method: "crypto",
      payment_provider: "onchain",
      token_symbol: "USDC",
      gross_amount: gross.toString(),
      fee_amount: fee.toString(),
      net_amount: (gross - fee).toString(),
      merchant_wallet: "0x1111111111111111111111111111111111111111",
      wallet_type: "eoa",
      receiving_address: owner.eoaAddress,
      description: null,
      metadata: JSON.stringify({}),
      return_url: null,
      cancel_url: null,
      expires_at: new Date(now.getTime() + 60 * 60_000),
      created_at: now,
      updated_at: now,
    })
    .returning("id")
    .executeTakeFirstOrThrow();
  return row.id;
}

/** A page's HTML with the entities of "/" and "=" read back (the other escapes stay). */
export function text(res: { body: string }): string {
  return res.body.replaceAll("&#x2F;", "/").replaceAll("&#x3D;", "=");
}

export function sectionOf(body: string, start: string, end: string): string {
  const at = body.indexOf(start);
  expect(at, `${start} is on the page`).toBeGreaterThan(-1);
  return body.slice(at, body.indexOf(end, at) + end.length);
}

/** A transfer's row of the inbox. */
export function rowOf(body: string, transferId: string): string {
  return sectionOf(body, `data-transfer-id="${transferId}"`, "</tr>");
}

export function hidden(html: string, name: string): string {
  const value = new RegExp(`name="${name}" value="([^"]+)"`).exec(html)?.[1];
  expect(value, `a ${name} field`).toBeDefined();
  return value ?? "";
}
