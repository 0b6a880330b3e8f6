import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Address, type Hex, type PublicClient, parseUnits } from "viem";
import type { BundlerClient } from "viem/account-abstraction";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, describe, expect, it } from "vitest";
import type { Devnet } from "../../src/devnet/chain.ts";
import { openDatabase, pgliteDirFor } from "../../src/platform/db/database.ts";
import {
  api,
  bundlerLog,
  pendingWhere,
  restoreMining,
  rpc,
  useCrashDevnet,
} from "../support/crash-harness.ts";
import type { DevnetClients } from "../support/devnet-clients.ts";
import { copyMigratedDatabase } from "../support/migrated-template.ts";
import { type Json, startService, stopService } from "../support/service-process.ts";

// Crash safety of a smart wallet payout (D11, D13) with the real process: the user operation is
// recorded (hash and signed body) before it goes to the bundler; mining is off so the bundle
// transaction stays pending; the service is killed -9; after a restart on the same DATA_DIR the
// reconciler sends the recorded operation again and the payout ends completed exactly once.

const ADMIN = "smart-wallet-crash-admin-secret-0123456789";
const TX_HASH = /^0x[0-9a-f]{64}$/;

const randomAddress = () => privateKeyToAccount(generatePrivateKey()).address;
const same = (a: string | null | undefined, b: string) => a?.toLowerCase() === b.toLowerCase();

let aa: NonNullable<Devnet["aa"]>;
let env: Record<string, string>;
let chain: PublicClient;
let bundler: BundlerClient;
let credit: DevnetClients["credit"];
let usdcBalance: DevnetClients["usdcBalance"];
const tempDirs: string[] = [];

useCrashDevnet(ADMIN, (d) => {
  ({ aa, env, bundler } = d);
  ({ chain, credit, usdcBalance } = d.clients);
});

afterAll(() => {
  for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true });
});

// ---------------------------------------------------------------------------------------------
// Chain helpers

/** Transactions to `address` waiting in the node's pool (the pending block). */
const pendingTo = (address: string) => pendingWhere((tx) => same(tx.to, address));

// ---------------------------------------------------------------------------------------------
// The real process

const startServer = (dataDir: string) => startService({ ...env, DATA_DIR: dataDir, ADMIN_SECRET: ADMIN });

async function payoutRows(dataDir: string, workspaceId: string) {
  const database = await openDatabase({ pgliteDir: pgliteDirFor(dataDir) });
  try {
    const payouts = await database.db
      .selectFrom("payouts")
      .select(["id", "status", "tx_hash", "user_op_hash", "user_operation", "error"])
      .where("workspace_id", "=", workspaceId)
      .execute();
    const completed = await database.db
      .selectFrom("outbox_events")
      .select("payload")
      .where("workspace_id", "=", workspaceId)
      .where("event_type", "=", "payout.completed")
      .execute();
    const failed = await database.db
      .selectFrom("outbox_events")
      .select("payload")
      .where("workspace_id", "=", workspaceId)
      .where("event_type", "=", "payout.failed")
      .execute();
    return { payouts, completed, failed };
  } finally {
    await database.close();
  }
}

// ---------------------------------------------------------------------------------------------

describe("smart wallet payout crash safety (real process, kill -9)", () => {
  it("a user operation whose bundle is pending when the process is killed ends completed exactly once", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "smart-wallet-crash-"));
    tempDirs.push(dataDir);
    // Its embedded database migrated already (made while the devnet started).
    await copyMigratedDatabase(dataDir);
    const first = await startServer(dataDir);

    const created = await api(first, "POST", "/api/v1/workspaces", ADMIN, {
      name: "Smart Crash Co",
      settlementAddress: randomAddress(),
    });
    expect(created.status, JSON.stringify(created.json)).toBe(201);
    const workspace = created.json.workspace as { id: string; eoa: { address: string } };
    const liveKey = (created.json.apiKeys as { live: { key: string } }).live.key;

    const wallet = await api(first, "POST", `/api/v1/workspaces/${workspace.id}/smart-wallet`, liveKey);
    expect([200, 201], JSON.stringify(wallet.json)).toContain(wallet.status);
    const smart = (wallet.json.smartWallet as { address: Address }).address;
    expect(
      same((wallet.json.smartWallet as { ownerAddress: string }).ownerAddress, workspace.eoa.address),
    ).toBe(true);
    await credit(smart, { USDC: "100" });
    expect(await usdcBalance(smart)).toBe(parseUnits("100", 6));
    const destination = randomAddress();

    // No more blocks: the operation is prepared, recorded and sent; the bundler's handleOps
    // transaction then waits in the node's pool and the payout waits for its receipt.
    await rpc("evm_setAutomine", [false]);
    await rpc("evm_setIntervalMining", [0]);
    const hanging = fetch(`${first.baseUrl}/api/v1/payouts`, {
      method: "POST",
      headers: { authorization: `Bearer ${liveKey}`, "content-type": "application/json" },
      body: JSON.stringify({
        tokenSymbol: "USDC",
        amount: "10",
        destinationAddress: destination,
        walletType: "smart_wallet",
      }),
    }).then(
      (res) => ({ status: res.status }),
      (err: Error) => ({ error: err.message }),
    );

    let pending: Array<{ hash: Hex; from: string }> = [];
    const deadline = Date.now() + 45_000;
    while (Date.now() < deadline && pending.length === 0) {
      pending = await pendingTo(aa.entryPoint);
      if (pending.length === 0) await new Promise((r) => setTimeout(r, 100));
    }
    expect(pending, `service: ${first.output()}\nbundler: ${bundlerLog}`).toHaveLength(1);
    const bundleHash = pending[0]?.hash as Hex;

    await stopService(first.child, "SIGKILL");
    expect(await first.exited).toEqual({ code: null, signal: "SIGKILL" });
    // The request never got an answer, and nothing moved yet.
    expect(await hanging).toHaveProperty("error");
    expect(await usdcBalance(destination)).toBe(0n);
    expect(await usdcBalance(smart)).toBe(parseUnits("100", 6));

    // What the killed process left behind: one processing payout with its recorded operation.
    const left = await payoutRows(dataDir, workspace.id);
    expect(left.payouts).toEqual([
      expect.objectContaining({
        status: "processing",
        tx_hash: null,
        user_op_hash: expect.stringMatching(TX_HASH),
        user_operation: expect.any(String),
      }),
    ]);
    const userOpHash = left.payouts[0]?.user_op_hash as Hex;

    await restoreMining();
    const second = await startServer(dataDir);
    let page: Json = {};
    const until = Date.now() + 90_000;
    while (Date.now() < until) {
      const res = await api(second, "GET", "/api/v1/payouts", liveKey);
      expect(res.status).toBe(200);
      page = res.json;
      if (page.total === 1) break;
      await new Promise((r) => setTimeout(r, 250));
    }
    expect(page, `service: ${second.output()}\nbundler: ${bundlerLog}`).toMatchObject({
      total: 1,
      payouts: [
        {
          txHash: expect.stringMatching(TX_HASH),
          type: "ERC20",
          details: { amount: "10.00", tokenSymbol: "USDC", destinationAddress: destination },
        },
      ],
    });
    const txHash = (page.payouts as Array<{ txHash: Hex }>)[0]?.txHash as Hex;

    // The transaction the service reports is the bundle that carried exactly this operation.
    const op = await bundler.getUserOperationReceipt({ hash: userOpHash });
    expect(op.success).toBe(true);
    expect(op.receipt.transactionHash).toBe(txHash);
    expect(same(op.sender, smart)).toBe(true);
    const receipt = await chain.getTransactionReceipt({ hash: txHash });
    expect(receipt.status).toBe("success");
    expect(same(receipt.to, aa.entryPoint)).toBe(true);
    expect(txHash, "the bundle pending at the crash is the one that was mined").toBe(bundleHash);

    // A few more blocks and reconcile rounds: nothing is sent a second time. A fixed wait on
    // purpose: what is proved is that nothing happens, which has no event to poll for.
    await new Promise((r) => setTimeout(r, 3_000));
    expect(await usdcBalance(destination)).toBe(parseUnits("10", 6));
    expect(await usdcBalance(smart)).toBe(parseUnits("90", 6));
    const again = await api(second, "GET", "/api/v1/payouts", liveKey);
    expect(again.json).toMatchObject({ total: 1, payouts: [{ txHash }] });

    // The database, read once the process has stopped: one completed payout, one event.
    await stopService(second.child, "SIGTERM");
    expect(await second.exited, `service: ${second.output()}`).toEqual({ code: 0, signal: null });
    const final = await payoutRows(dataDir, workspace.id);
    expect(final.payouts).toEqual([
      expect.objectContaining({ status: "completed", tx_hash: txHash, user_op_hash: userOpHash }),
    ]);
    expect(final.completed).toHaveLength(1);
    expect(final.completed[0]?.payload).toMatchObject({ txHash, status: "completed", amount: "10.00" });
    expect(final.failed).toEqual([]);
  }, 300_000);
});
