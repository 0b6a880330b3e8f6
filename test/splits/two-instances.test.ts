import { parseUnits } from "viem";
import { describe, expect, it } from "vitest";
import { startServer } from "../support/crash-harness.ts";
import { untilDefined } from "../support/poll.ts";
import { stopService } from "../support/service-process.ts";
import {
  chain,
  createPayment,
  credit,
  devnet,
  EXTRA_USDC,
  eventsOf,
  expectEventsOnce,
  expectOneSettlement,
  expectPaidOnce,
  holdingProxy,
  legsOf,
  newStore,
  payUsdc,
  usdcBalance,
  useSplitsCrashDevnet,
  waitForForwarded,
  workspaceWithSplits,
} from "../support/splits-crash.ts";

// Two instances settling payments with splits (D15) on one PostgreSQL server and one devnet, with
// the real process (`node src/main.ts`): the leader is killed -9 between legs and the other one
// finishes; or the leader is stopped (SIGSTOP) between legs past its lease, and continued. Every
// destination is paid exactly once and each payment is forwarded with one settlement. Each
// receiving wallet holds money of its own besides the payments, so a leg sent twice would be paid
// (and show in the exact balances) rather than revert for want of funds. PostgreSQL only (PGlite
// is one process's): skipped without DATABASE_URL.

useSplitsCrashDevnet();

type Server = Awaited<ReturnType<typeof startServer>>;
type Store = Awaited<ReturnType<typeof newStore>>;
type Setup = Awaited<ReturnType<typeof workspaceWithSplits>>;
type Payment = Awaited<ReturnType<typeof createPayment>>;

/**
 * A starts first (its node behind a proxy that holds A's second broadcast once armed) and leads
 * the chain job; B starts once A holds its lease. A workspace with splits (made through
 * `workspaceOn`), funded with money of its own, and a payment for each amount, created on A and
 * B in turn; then the proxy is armed and every payment paid, and A is held between legs.
 */
async function leaderHeldBetweenLegs(store: Store, workspaceOn: "a" | "b", amounts: string[]) {
  const proxy = await holdingProxy(2);
  const a = await startServer(store, { LIVE_RPC_URL: proxy.url });
  const lease = () =>
    store.read((database) =>
      database.db
        .selectFrom("job_leases")
        .select(["holder", "expires_at"])
        .where("name", "=", "chain.live")
        .executeTakeFirst(),
    );
  const leaderA = await untilDefined("A to lead the chain job", lease, 60_000);
  const b = await startServer(store);
  const setup = await workspaceWithSplits(workspaceOn === "a" ? a : b);
  await credit(setup.eoa, { USDC: EXTRA_USDC, ETH: "1" });
  const payments: Payment[] = [];
  for (const [i, amount] of amounts.entries())
    payments.push(await createPayment(i % 2 ? a : b, setup, amount));
  const treasuryBefore = await usdcBalance(devnet.accounts.treasury.address);

  proxy.arm(setup.eoa);
  for (const p of payments) await payUsdc(p.receivingAddress, p.gross);
  await proxy.whenHeld(a);
  return { proxy, a, b, lease, leaderA, setup, payments, treasuryBefore };
}

/**
 * Every destination paid once, the wallet left with its own money, five transactions a payment,
 * each payment's legs mined once and its one settlement as `servers` read it, its events once.
 */
async function expectSettledOnce(
  store: Store,
  setup: Setup,
  payments: Payment[],
  treasuryBefore: bigint,
  servers: Server[],
) {
  await expectPaidOnce(setup, payments, treasuryBefore);
  expect(await usdcBalance(setup.eoa)).toBe(parseUnits(EXTRA_USDC, 6));
  expect(await chain.getTransactionCount({ address: setup.eoa })).toBe(5 * payments.length);
  const legs = await store.read(async (database) => Promise.all(payments.map((p) => legsOf(database, p.id))));
  for (const [i, p] of payments.entries()) {
    const ofIt = legs[i] ?? [];
    expect(ofIt.map((leg) => [leg.purpose, leg.status])).toEqual([
      ["settlement_net", "mined"],
      ["settlement_fee", "mined"],
      ...setup.splits.map((split) => [`split:${split.id}`, "mined"]),
    ]);
    const tx = new Map(ofIt.map((leg) => [leg.purpose, leg.tx_hash]));
    for (const server of servers)
      await expectOneSettlement(server, setup, p.id, {
        merchant: tx.get("settlement_net") as string,
        splits: setup.splits.map((split) => tx.get(`split:${split.id}`) as string),
      });
  }
  expectEventsOnce(await store.read((database) => eventsOf(database, setup.workspaceId)), payments.length);
}

// Two processes on one database need PostgreSQL (PGlite is one process's).
describe.skipIf(!process.env.DATABASE_URL)("two instances settling payments with splits", () => {
  it("the leader killed -9 between legs: the other instance takes over and every payment is settled once", async () => {
    const started = performance.now();
    const store = await newStore();
    const { proxy, a, b, lease, leaderA, setup, payments, treasuryBefore } = await leaderHeldBetweenLegs(
      store,
      "b",
      ["10.000001", "11.000011", "12.000111"],
    );
    await stopService(a.child, "SIGKILL");
    proxy.drop();
    const killedAt = performance.now();
    expect((await lease())?.holder).toBe(leaderA.holder);

    for (const p of payments) await waitForForwarded(b, setup, p.id, 180_000);
    const finishedAt = performance.now();
    expect((await lease())?.holder).not.toBe(leaderA.holder);
    await expectSettledOnce(store, setup, payments, treasuryBefore, [b]);
    console.info(
      `[splits-crash] two instances: A killed after ${((killedAt - started) / 1000).toFixed(1)} s, B forwarded all ${payments.length} ${((finishedAt - killedAt) / 1000).toFixed(1)} s after the kill`,
    );
  }, 400_000);

  it("the leader stopped (SIGSTOP) between legs past its lease, then continued: every payment is settled once", async () => {
    const started = performance.now();
    const store = await newStore();
    const { proxy, a, b, lease, leaderA, setup, payments, treasuryBefore } = await leaderHeldBetweenLegs(
      store,
      "a",
      ["20.000002", "21.000021", "22.000221"],
    );
    // A stands still with its legs recorded and the second one's broadcast on its way, holding
    // the wallet's lock; B takes the chain job over once A's lease has run out.
    a.child.kill("SIGSTOP");
    const stoppedAt = performance.now();
    await untilDefined(
      "B to take the chain job over",
      async () => {
        const now = await lease();
        return now && now.holder !== leaderA.holder ? true : undefined;
      },
      120_000,
    );
    const takenOverAt = performance.now();
    // A goes on: its held broadcast reaches the node, and it finishes sending what it recorded.
    proxy.pass();
    a.child.kill("SIGCONT");

    for (const p of payments) await waitForForwarded(b, setup, p.id, 180_000);
    const finishedAt = performance.now();
    expect(a.child.exitCode, a.output()).toBeNull(); // A is still running
    await expectSettledOnce(store, setup, payments, treasuryBefore, [a, b]);
    console.info(
      `[splits-crash] two instances, SIGSTOP: A stopped after ${((stoppedAt - started) / 1000).toFixed(1)} s, B led ${((takenOverAt - stoppedAt) / 1000).toFixed(1)} s later, all ${payments.length} forwarded ${((finishedAt - takenOverAt) / 1000).toFixed(1)} s after A was continued`,
    );
  }, 400_000);
});
