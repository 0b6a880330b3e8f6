import { describe, expect, it } from "vitest";
import { InFlight } from "./in-flight.ts";

describe("InFlight", () => {
  it("drains at once when nothing runs", async () => {
    const inFlight = new InFlight();
    await expect(inFlight.drained()).resolves.toBeUndefined();
  });

  it("waits for every begun piece of work, counting a repeated release once", async () => {
    const inFlight = new InFlight();
    const first = inFlight.begin();
    const second = inFlight.begin();
    let drained = false;
    const waiting = inFlight.drained().then(() => {
      drained = true;
    });
    first();
    first();
    await new Promise((resolve) => setImmediate(resolve));
    expect(inFlight.running).toBe(1);
    expect(drained).toBe(false);
    second();
    await waiting;
    expect(drained).toBe(true);
    expect(inFlight.running).toBe(0);
  });

  it("tracks a promise until it settles, rejected ones too, and passes it through", async () => {
    const inFlight = new InFlight();
    let fail: (err: Error) => void = () => {};
    const work = new Promise<never>((_, reject) => {
      fail = reject;
    });
    const tracked = inFlight.track(work);
    expect(tracked).toBe(work);
    expect(inFlight.running).toBe(1);
    fail(new Error("write failed"));
    await expect(tracked).rejects.toThrow("write failed");
    await inFlight.drained();
    expect(inFlight.running).toBe(0);
  });
});
