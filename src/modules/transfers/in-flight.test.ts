import { describe, expect, it } from "vitest";
import { InFlightTransfers } from "./in-flight.ts";

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

describe("InFlightTransfers", () => {
  it("counts each scope's payouts until they are done, failed or not", async () => {
    const flight = new InFlightTransfers();
    const a = deferred();
    const b = deferred();
    flight.add("ws1:live", a.promise);
    flight.add("ws1:live", b.promise);
    flight.add("ws2:live", new Promise(() => {}));
    expect(flight.size("ws1:live")).toBe(2);
    expect(flight.size("ws1:sandbox")).toBe(0);

    a.resolve();
    await a.promise;
    await Promise.resolve();
    expect(flight.size("ws1:live")).toBe(1);
    b.reject(new Error("reverted"));
    await b.promise.catch(() => undefined);
    await Promise.resolve();
    expect(flight.size("ws1:live")).toBe(0);
    expect(flight.size("ws2:live")).toBe(1);
  });

  it("below(limit) waits until fewer than limit are in flight; drain waits for all of them", async () => {
    const flight = new InFlightTransfers();
    const first = deferred();
    const second = deferred();
    flight.add("s", first.promise);
    flight.add("s", second.promise);

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
