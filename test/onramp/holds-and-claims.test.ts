import { sql } from "kysely";
import { keccak256, toHex } from "viem";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { mine } from "../../src/devnet/chain.ts";
import { createWorkspace } from "../support/app.ts";
import { TEST_CONFIRMATIONS } from "../support/confirmations.ts";
import { LIVE_DEFAULT } from "../support/devnet-env.ts";
import { type OnrampLive, onrampActors, startOnrampLive } from "../support/onramp-live.ts";

// An on-ramp delivery counts once, and a session never stops a payer (issue 36, items 1, 2, 14, 15):
// - a transfer a payment took is never credited to a session as well, even when the provider
//   names it later (the transfer's claim is the payment's);
// - a session holds back from payments only a transfer that can be its delivery (its currency,
//   wallet and amount) and only for an hour after it last changed, each hold logged; one fulfilled
//   without its transaction is counted as stuck (onramp_sessions_stuck), and holds nothing after;
// - the confirmation job looks at a session less and less often, and gives up after three days;
// - the confirmation job locks the session before the inbox (the provider's events' order).

const HOUR = 3_600_000;

let h: OnrampLive;
const a = onrampActors(() => h);

beforeAll(async () => {
  h = await startOnrampLive();
}, 180_000);

afterEach(() => {
  h.t.setNow(undefined);
  vi.restoreAllMocks();
});

afterAll(async () => {
  await h?.stop();
});

/** Mines `blocks` blocks, running the confirmation (the chain job's step) after each. */
async function confirmationRounds(blocks: number) {
  for (let i = 0; i < blocks; i++) {
    await mine(h.devnet, 1);
    await h.t.app.services.onramp.confirm(LIVE_DEFAULT);
  }
}

const logged = (spy: { mock: { calls: unknown[][] } }, text: string) =>
  spy.mock.calls.filter((call) => call.some((arg) => typeof arg === "string" && arg.includes(text)));

describe("a transfer counts once", () => {
  it("a delivery that paid a payment (the session's hold had lapsed) is not credited to the session when the provider names it", async () => {
    const ws = await createWorkspace(h.t);
    const { id: paymentId } = await a.pendingPayment(ws, "12.00");
    const { id, provider } = await a.opened(ws, { destinationCurrency: "USDC", destinationAmount: "12.00" });
    await a.moved(provider.id, "fulfillment_processing");
    // Over an hour without news of the session: it holds nothing any more.
    h.t.setNow(new Date(Date.now() + 2 * HOUR));
    const errors = vi.spyOn(h.t.app.ctx.log, "error");
    const fulfilment = await h.fake.fulfil(
      provider.id,
      a.delivery(12_000_000n, { destinationAmount: "12.00" }),
    );
    const paid = await a.until(
      "the payment paid by the delivery",
      () => a.getPayment(ws, paymentId),
      (p) => p.status !== "pending",
    );
    expect(paid.txHash).toBe(fulfilment.txHash);
    // The provider names the transaction only now, and the chain confirms it.
    expect((await a.deliver(fulfilment.delivery)).json()).toEqual({ received: true });
    await confirmationRounds(Number(TEST_CONFIRMATIONS) + 1);
    expect(await a.getSession(ws, id)).toMatchObject({
      status: "fulfillment_complete",
      transactionId: fulfilment.txHash,
      creditedAmount: null,
      completedAt: null,
    });
    expect(await a.statusesOf(ws)).toEqual([
      "onramp.session.updated:fulfillment_processing",
      "onramp.session.updated:fulfillment_complete",
    ]);
    expect(logged(errors, "already counted as a payment").length).toBeGreaterThan(0);
    expect(await a.inInbox(ws, fulfilment.txHash)).toEqual([]);
  }, 120_000);
});

describe("what a session holds back from payments", () => {
  it("only a transfer of its amount: a payer's transfer of another amount pays its payment, and each hold is logged", async () => {
    const ws = await createWorkspace(h.t);
    const other = await a.pendingPayment(ws, "15.00");
    const same = await a.pendingPayment(ws, "20.00");
    const { id, provider } = await a.opened(ws, { destinationCurrency: "USDC", destinationAmount: "20.00" });
    await a.moved(provider.id, "fulfillment_processing");
    const infos = vi.spyOn(h.t.app.ctx.log, "info");

    await h.clients.fund(ws.eoaAddress, { USDC: "15" });
    await a.until(
      "the 15.00 payment paid",
      () => a.getPayment(ws, other.id),
      (p) => p.status !== "pending",
    );

    // 20.00 may be the session's delivery: held in the inbox, the payment of 20.00 waits.
    const hash = await h.clients.sendUsdc(ws.eoaAddress, 20_000_000n);
    const receipt = await h.chain.waitForTransactionReceipt({ hash });
    await a.watcherPassed(receipt.blockNumber);
    const [held] = await a.inInbox(ws, hash);
    expect(held).toMatchObject({ status: "open", amount: "20.00" });
    expect(String(held?.reason)).toContain(id);
    expect((await a.getPayment(ws, same.id)).status).toBe("pending");
    const holds = infos.mock.calls.filter(
      (call) => call[1] === "transfer held from payments: it may be an on-ramp session's delivery",
    );
    expect(holds.map((call) => call[0])).toEqual([
      expect.objectContaining({ txHash: hash.toLowerCase(), onrampId: id }),
    ]);
  }, 120_000);

  it("a session fulfilled without its transaction holds nothing after an hour, and counts as stuck", async () => {
    const ws = await createWorkspace(h.t);
    const { provider } = await a.opened(ws, { destinationCurrency: "USDC", destinationAmount: "9.00" });
    await a.moved(provider.id, "fulfillment_complete", { destinationAmount: "9.00" });
    const stuck = { environment: "live", reason: "fulfilled_without_transaction" };
    const before = (await a.metrics()).count("onramp_sessions_stuck", stuck);

    h.t.setNow(new Date(Date.now() + HOUR + 60_000));
    expect((await a.metrics()).count("onramp_sessions_stuck", stuck)).toBe(before + 1);
    const { id: paymentId } = await a.pendingPayment(ws, "9.00");
    await h.clients.fund(ws.eoaAddress, { USDC: "9" });
    await a.until(
      "the payment paid",
      () => a.getPayment(ws, paymentId),
      (p) => p.status !== "pending",
    );
  }, 120_000);
});

describe("the confirmation job and a session that never credits", () => {
  /** Until the chain job has run a few whole ticks (each ends with the confirmation). */
  async function jobTicks() {
    const head = await h.chain.getBlockNumber();
    await mine(h.devnet, 3);
    await a.watcherPassed(head + 3n);
  }

  it("looks at it at most once per a tenth of its age, then gives up after three days, logged and counted", async () => {
    const ws = await createWorkspace(h.t);
    const { id, provider } = await a.opened(ws, { destinationCurrency: "USDC", sourceAmount: "20.00" });
    const nowhere = keccak256(toHex(`no such transaction ${id}`));
    await a.moved(provider.id, "fulfillment_complete", { transactionId: nowhere, destinationAmount: "20" });

    // Ten hours after it was fulfilled: looked at once an hour, however often the job runs.
    h.t.setNow(new Date(Date.now() + 10 * HOUR));
    const warnings = vi.spyOn(h.t.app.ctx.log, "warn");
    const notOnChain = () =>
      warnings.mock.calls.filter(
        (call) =>
          (call[0] as { onrampId?: string } | undefined)?.onrampId === id &&
          String(call[1]).includes("not on chain"),
      ).length;
    await a.until(
      "the session looked at",
      async () => notOnChain(),
      (n) => n > 0,
    );
    warnings.mockClear();
    for (let i = 0; i < 5; i++) await h.t.app.services.onramp.confirm(LIVE_DEFAULT);
    await jobTicks();
    expect(notOnChain()).toBe(0);

    const given = { environment: "live", reason: "confirmation_given_up" };
    const before = (await a.metrics()).count("onramp_sessions_stuck", given);
    const errors = vi.spyOn(h.t.app.ctx.log, "error");
    h.t.setNow(new Date(Date.now() + 3 * 24 * HOUR + HOUR));
    const gaveUp = () => logged(errors, "no longer looked for").map((call) => call[0]);
    await a.until(
      "the job to give up",
      async () => gaveUp().length,
      (n) => n > 0,
    );
    await jobTicks();
    expect(gaveUp()).toEqual([expect.objectContaining({ onrampId: id, txHash: nowhere })]);
    expect(notOnChain()).toBe(0);
    expect((await a.metrics()).count("onramp_sessions_stuck", given)).toBe(before + 1);
    expect(await a.getSession(ws, id)).toMatchObject({ creditedAmount: null, transactionId: nowhere });
  }, 120_000);
});

describe.skipIf(!process.env.DATABASE_URL)("the confirmation job's lock order", () => {
  it("locks the session before the inbox, as the provider's events do", async () => {
    const ws = await createWorkspace(h.t);
    const { id, provider } = await a.opened(ws, { destinationCurrency: "USDC", destinationAmount: "6.00" });
    await a.moved(provider.id, "fulfillment_processing");
    const fulfilment = await h.fake.fulfil(
      provider.id,
      a.delivery(6_000_000n, { destinationAmount: "6.00" }),
    );
    await a.watcherPassed(fulfilment.blockNumber);
    const [item] = await a.until(
      "the delivery in the inbox",
      () => a.inInbox(ws, fulfilment.txHash),
      (l) => l.length > 0,
    );
    const db = h.t.database.db;
    // The job finds the session fulfilled, its transaction named, while the watcher's inbox item of
    // it is still open (the two committed together): the session is named here, the item left open.
    await sql`UPDATE onramp_sessions SET status = 'fulfillment_complete', transaction_id = ${fulfilment.txHash}
              WHERE id = ${id}`.execute(db);
    await mine(h.devnet, Number(TEST_CONFIRMATIONS));

    // Something holds the inbox item (as an event does, after the session: apply.ts); the job's
    // confirmation then waits for it...
    let release = () => {};
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    let holding = () => {};
    const held = new Promise<void>((resolve) => {
      holding = resolve;
    });
    const holder = db.transaction().execute(async (trx) => {
      await sql`SELECT id FROM unmatched_transfers WHERE id = ${String(item?.id)} FOR UPDATE`.execute(trx);
      holding();
      await released;
    });
    await held;
    const confirming = h.t.app.services.onramp.confirm(LIVE_DEFAULT);
    try {
      await a.until(
        "the confirmation waiting for the inbox item",
        async () =>
          Number(
            (
              await sql<{ n: string }>`SELECT count(*) AS n FROM pg_stat_activity
                                       WHERE wait_event_type = 'Lock' AND datname = current_database()`.execute(
                db,
              )
            ).rows[0]?.n,
          ),
        (n) => n > 0,
        20_000,
      );
      // ...holding the session already: an event, which takes the session first, waits there and
      // never holds the inbox against the confirmation (no deadlock).
      const event = db
        .transaction()
        .execute((trx) =>
          sql`SELECT id FROM onramp_sessions WHERE id = ${id} FOR UPDATE NOWAIT`.execute(trx),
        );
      await expect(event).rejects.toMatchObject({ code: "55P03" });
    } finally {
      release();
      await holder;
      await confirming;
    }
    await a.until(
      "the session credited",
      () => a.getSession(ws, id),
      (s) => s.creditedAmount === "6.00",
    );
  }, 120_000);
});
