import { sql } from "kysely";
import type { Address, Hex } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EvmNetwork } from "../../src/chain/evm/evm-network.ts";
import { RecordRefused } from "../../src/chain/sent-types.ts";
import type { TransactionSender } from "../../src/chain/transaction-sender.ts";
import { type Devnet, startDevnet } from "../../src/devnet/chain.ts";
import { EoaRail } from "../../src/rails/eoa-rail.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { type DevnetClients, devnetClients } from "../support/devnet-clients.ts";
import { liveNetworkEnv } from "../support/devnet-env.ts";
import { holding, startRpcProxy } from "../support/rpc-proxy.ts";

// A wallet's sends that arrive while its turn is held share its next turn (transaction-sender.ts):
// one read of the node, one database transaction recording all of them, their broadcasts in one
// request. Each send's own claim still decides it alone, the node's refusal of one in the middle
// skips no nonce, and the rail's balance reads in flight are shared, never kept; so is the count
// and fees a turn reads, which may be begun before the send and still be sound. The node's pending
// count goes in a request of its own: the rail asks for it beside the balance check's reads.

const randomAddress = () => privateKeyToAccount(generatePrivateKey()).address;
const HOLDS = sql`SELECT 1 AS claimed`;
const REFUSES = sql`SELECT 1 AS claimed WHERE false`;

let devnet: Devnet;
let t: TestApp;
let sender: TransactionSender;
let clients: DevnetClients;

beforeAll(async () => {
  devnet = await startDevnet();
  t = await startTestApp(liveNetworkEnv(devnet));
  clients = devnetClients(devnet);
  const chain = t.app.ctx.chains.defaultOf("live");
  if (!chain) throw new Error("no live chain");
  sender = chain.sender;
}, 120_000);

afterAll(async () => {
  await t?.close();
  await devnet?.stop();
});

/** A wallet of its own, with USDC and ETH. */
async function fundedWallet(): Promise<{ key: Hex; from: Address }> {
  const key = generatePrivateKey();
  const from = privateKeyToAccount(key).address;
  await clients.credit(from, { USDC: "100", ETH: "1" });
  return { key, from };
}

const usdc = (to: Address, amount: bigint, gas?: bigint) => ({
  token: "USDC" as const,
  to,
  amount,
  purpose: "payout",
  ...(gas === undefined ? {} : { gas }),
});

function recordedFrom(from: Address) {
  return t.database.db
    .selectFrom("chain_transactions")
    .select(["nonce", "purpose", "to_address", "status"])
    .where("from_address", "=", from)
    .orderBy("nonce")
    .orderBy("purpose")
    .execute();
}

describe("a wallet's sends that arrive together", () => {
  it("are recorded with consecutive nonces; a send whose claim refuses is left out, with no gap", async () => {
    const { key, from } = await fundedWallet();
    const destinations = Array.from({ length: 6 }, () => randomAddress());
    // Called in one tick: they share one turn.
    const results = await Promise.allSettled(
      destinations.map((to, i) =>
        sender.submit(key, from, [usdc(to, BigInt(i + 1))], { claim: i === 3 ? REFUSES : HOLDS }),
      ),
    );
    expect(results[3]?.status).toBe("rejected");
    if (results[3]?.status === "rejected") expect(results[3].reason).toBeInstanceOf(RecordRefused);
    const sent = results.flatMap((r) => (r.status === "fulfilled" ? r.value : []));
    expect(sent.map((s) => [s.nonce, s.refusal])).toEqual([0, 1, 2, 3, 4].map((n) => [n, null]));
    const outcomes = await sender.receipts(sent);
    expect(outcomes.map((o) => o.status)).toEqual(Array(5).fill("success"));
    const recorded = await recordedFrom(from);
    expect(recorded.map((r) => [Number(r.nonce), r.to_address.toLowerCase()])).toEqual(
      destinations.filter((_, i) => i !== 3).map((to, n) => [n, to.toLowerCase()]),
    );
    for (const [i, to] of destinations.entries())
      expect(await clients.usdcBalance(to)).toBe(i === 3 ? 0n : BigInt(i + 1));
  }, 60_000);

  it("skip no nonce when the node refuses one in the middle: it is cancelled, the ones after it are mined", async () => {
    const { key, from } = await fundedWallet();
    const destinations = Array.from({ length: 4 }, () => randomAddress());
    // 20,000 gas is below what any transaction costs: the node refuses the third one.
    const submitted = await Promise.all(
      destinations.map((to, i) =>
        sender.submit(key, from, [usdc(to, 5n, i === 2 ? 20_000n : undefined)], { claim: HOLDS }),
      ),
    );
    const all = submitted.flat();
    expect(all.map((s) => s.nonce)).toEqual([0, 1, 2, 3]);
    expect(all.map((s) => s.refusal === null)).toEqual([true, true, false, true]);
    expect(all[2]?.refusal?.cancelHash).toMatch(/^0x[0-9a-f]{64}$/);
    const outcomes = await sender.receipts(all);
    expect(outcomes.map((o) => o.status)).toEqual(["success", "success", "reverted", "success"]);
    expect(outcomes[2]?.error).toMatch(/gas/i);
    expect((await recordedFrom(from)).map((r) => [Number(r.nonce), r.purpose, r.status])).toEqual([
      [0, "payout", "mined"],
      [1, "payout", "mined"],
      [2, "cancel", "mined"],
      [2, "payout", "replaced"],
      [3, "payout", "mined"],
    ]);
    for (const [i, to] of destinations.entries())
      expect(await clients.usdcBalance(to)).toBe(i === 2 ? 0n : 5n);
    expect(await clients.chain.getTransactionCount({ address: from })).toBe(4);
  }, 60_000);
});

describe("a wallet's count and fees read ahead of its turn", () => {
  it("are shared while in flight, and read again once done", async () => {
    const { key, from } = await fundedWallet();
    const first = sender.readAhead(from);
    expect(sender.readAhead(from)).toBe(first);
    expect((await first).pendingNonce).toBe(0);
    const [sent] = await sender.submit(key, from, [usdc(randomAddress(), 1n)], { claim: HOLDS });
    if (!sent) throw new Error("nothing sent");
    await sender.receipts([sent]);
    const again = sender.readAhead(from);
    expect(again).not.toBe(first);
    expect((await again).pendingNonce).toBe(1);
  }, 60_000);

  it("may be older than the wallet's last send: the next nonce still follows the recorded ones", async () => {
    const { key, from } = await fundedWallet();
    const early = sender.readAhead(from); // the node's count before anything is sent: 0
    expect((await early).pendingNonce).toBe(0);
    const [a] = await sender.submit(key, from, [usdc(randomAddress(), 1n)], { claim: HOLDS });
    const [b] = await sender.submit(key, from, [usdc(randomAddress(), 2n)], { claim: HOLDS, reads: early });
    if (!a || !b) throw new Error("nothing sent");
    expect([a.nonce, b.nonce]).toEqual([0, 1]);
    expect((await sender.receipts([a, b])).map((o) => o.status)).toEqual(["success", "success"]);
  }, 60_000);
});

describe("an EOA rail's balance reads", () => {
  it("are shared while in flight, and read again once done", async () => {
    const chain = t.app.ctx.chains.defaultOf("live");
    if (!chain) throw new Error("no live chain");
    const rail = new EoaRail(chain.network, chain.sender, t.database.db);
    const { from } = await fundedWallet();
    const first = rail.funds(from, ["USDC", "ETH"]);
    expect(rail.funds(from, ["USDC", "ETH"])).toBe(first);
    expect(rail.funds(from, ["USDC"])).not.toBe(first); // other tokens: a read of its own
    expect((await first).balances.USDC).toBe(100_000_000n);
    await clients.credit(from, { USDC: "50" });
    const again = rail.funds(from, ["USDC", "ETH"]);
    expect(again).not.toBe(first);
    expect((await again).balances.USDC).toBe(150_000_000n);
  }, 60_000);
});

describe("the node's pending count of a wallet", () => {
  it("is asked in a request of its own: while the node holds it, the wallet's balances are answered", async () => {
    const { from } = await fundedWallet();
    const config = t.app.ctx.chains.defaultOf("live")?.config;
    if (!config) throw new Error("no live chain");
    const held = holding((method, params) => method === "eth_getTransactionCount" && params[1] === "pending");
    const proxy = await startRpcProxy(devnet.rpcUrl, held.hook);
    try {
      const network = new EvmNetwork({ ...config, rpcUrl: proxy.url });
      let count: number | undefined;
      const pending = network.pendingNonce(from).then((n) => {
        count = n;
      });
      // Asked in the same tick as the count: a batch of the two would wait for the held count.
      const state = await network.accountAt(from, ["ETH", "USDC"]);
      expect(state).toEqual({ balances: { ETH: 10n ** 18n, USDC: 100_000_000n }, minedNonce: 0 });
      expect(count).toBeUndefined();
      held.release();
      await pending;
      expect(count).toBe(0);
    } finally {
      held.release();
      await proxy.close();
    }
  }, 60_000);
});
