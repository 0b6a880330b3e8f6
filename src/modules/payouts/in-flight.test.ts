import { describe, expect, it } from "vitest";
import { InFlightPayouts, stillToTake } from "./in-flight.ts";

function deferred() {
  let resolve!: () => void;
  let reject!: (err: Error) => void;
  const promise = new Promise<void>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

const settledWithin = async (promise: Promise<unknown>, ms = 20) =>
  Promise.race([promise.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), ms))]);

describe("InFlightPayouts", () => {
  it("reserves each token's amounts per scope until the payout is done, failed or not", async () => {
    const flight = new InFlightPayouts();
    const a = deferred();
    const b = deferred();
    flight.add("ws1:live", { amounts: { USDC: 5n, ETH: 2n }, done: a.promise });
    flight.add("ws1:live", { amounts: { USDC: 7n }, done: b.promise });
    flight.add("ws2:live", { amounts: { USDC: 100n }, done: new Promise(() => {}) });
    const reserved = (scope: string, token: "USDC" | "ETH" | "ADAO") =>
      stillToTake(flight.snapshot(scope), token, null);
    expect(reserved("ws1:live", "USDC")).toBe(12n);
    expect(reserved("ws1:live", "ETH")).toBe(2n);
    expect(reserved("ws1:live", "ADAO")).toBe(0n);
    expect(reserved("ws1:sandbox", "USDC")).toBe(0n);
    expect(flight.size("ws1:live")).toBe(2);

    a.resolve();
    await a.promise;
    await Promise.resolve();
    expect(reserved("ws1:live", "USDC")).toBe(7n);
    b.reject(new Error("reverted"));
    await b.promise.catch(() => undefined);
    await Promise.resolve();
    expect(flight.size("ws1:live")).toBe(0);
    expect(reserved("ws1:live", "USDC")).toBe(0n);
    expect(flight.size("ws2:live")).toBe(1);
  });

  it("a snapshot keeps counting a payout that finishes after it was taken", async () => {
    const flight = new InFlightPayouts();
    const a = deferred();
    flight.add("s", { amounts: { USDC: 5n }, done: a.promise });
    const snapshot = flight.snapshot("s");
    a.resolve();
    await a.promise;
    await Promise.resolve();
    expect(flight.size("s")).toBe(0);
    expect(stillToTake(snapshot, "USDC", null)).toBe(5n);
  });
});

describe("stillToTake", () => {
  const payouts = [
    { amounts: { USDC: 1n, ETH: 10n }, nonce: 4, done: Promise.resolve() },
    { amounts: { USDC: 2n, ETH: 20n }, nonce: 5, done: Promise.resolve() },
    { amounts: { USDC: 4n, ETH: 40n }, done: Promise.resolve() }, // not broadcast yet
  ];

  it("leaves out the payouts whose nonce is mined at the block the balance was read", () => {
    expect(stillToTake(payouts, "USDC", 4)).toBe(7n);
    expect(stillToTake(payouts, "USDC", 5)).toBe(6n);
    expect(stillToTake(payouts, "ETH", 6)).toBe(40n);
    expect(stillToTake(payouts, "ADAO", 6)).toBe(0n);
  });

  it("counts every payout when the mined nonce is not known", () => {
    expect(stillToTake(payouts, "USDC", null)).toBe(7n);
    expect(stillToTake(payouts, "ETH", null)).toBe(70n);
  });

  it("never leaves out a payout without a nonce, however far the chain is", () => {
    expect(stillToTake(payouts, "USDC", 1_000)).toBe(4n);
  });

  it("below(limit) waits until fewer than limit are in flight; drain waits for all of them", async () => {
    const flight = new InFlightPayouts();
    const first = deferred();
    const second = deferred();
    flight.add("s", { amounts: {}, done: first.promise });
    flight.add("s", { amounts: {}, done: second.promise });

    expect(await settledWithin(flight.below("s", 3))).toBe(true);
    const below2 = flight.below("s", 2);
    const drained = flight.drain("s");
    expect(await settledWithin(below2)).toBe(false);
    first.reject(new Error("failed"));
    expect(await settledWithin(below2)).toBe(true);
    expect(await settledWithin(drained)).toBe(false);
    second.resolve();
    expect(await settledWithin(drained)).toBe(true);
    expect(await settledWithin(flight.drain("nothing in flight"))).toBe(true);
  });
});
