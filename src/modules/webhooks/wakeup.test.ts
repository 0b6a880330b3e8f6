import { describe, expect, it } from "vitest";
import { Wakeup } from "./wakeup.ts";

const MINUTE = 60_000;

/** How the wait ended: "rung" before `within` ms, else "timed out" (the test's own bound). */
async function outcome(wait: Promise<void>, within: number): Promise<"rung" | "timed out"> {
  let timer: NodeJS.Timeout | undefined;
  const bound = new Promise<"timed out">((resolve) => {
    timer = setTimeout(() => resolve("timed out"), within);
  });
  const result = await Promise.race([wait.then(() => "rung" as const), bound]);
  clearTimeout(timer);
  return result;
}

describe("Wakeup", () => {
  it("keeps a ring that comes while the loop is not waiting: the next wait ends at once", async () => {
    const w = new Wakeup();
    w.reset();
    w.ring(); // a host's queue ran low while a claim was under way
    expect(await outcome(w.wait(MINUTE), 1_000)).toBe("rung");
  });

  it("ends a wait when rung during it", async () => {
    const w = new Wakeup();
    w.reset();
    const waiting = w.wait(MINUTE);
    setTimeout(() => w.ring(), 10);
    expect(await outcome(waiting, 1_000)).toBe("rung");
  });

  it("forgets the rings before a reset, and otherwise waits out the interval", async () => {
    const w = new Wakeup();
    w.ring();
    w.reset(); // the claim about to start covers it
    const waiting = w.wait(MINUTE);
    expect(await outcome(waiting, 100)).toBe("timed out");
    w.ring();
    await waiting;
    const started = performance.now();
    await new Wakeup().wait(30);
    expect(performance.now() - started).toBeGreaterThanOrEqual(25);
  });
});
