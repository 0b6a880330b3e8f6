import { describe, expect, it } from "vitest";
import { chainTick } from "./workers.ts";

// The chain job's order: the engine's reconcile, the watcher, the settlement, the on-ramp's
// confirmations; the settlement never runs after a failed reconcile or watcher.

function steps(fail: { reconcile?: Error; watch?: Error } = {}) {
  const ran: string[] = [];
  const step = (name: string, error?: Error) => async () => {
    ran.push(name);
    if (error) throw error;
  };
  return {
    ran,
    steps: {
      reconcile: step("reconcile", fail.reconcile),
      watch: step("watch", fail.watch),
      settle: step("settle"),
      confirmOnramp: step("confirmOnramp"),
    },
  };
}

describe("chainTick", () => {
  it("reconciles before the watcher confirms, and settles right after it", async () => {
    const { ran, steps: tick } = steps();
    await chainTick(tick);
    expect(ran).toEqual(["reconcile", "watch", "settle", "confirmOnramp"]);
  });

  it("still watches when the reconcile fails, then fails the tick with its error and settles nothing", async () => {
    const bundlerDown = new Error("bundler down");
    const { ran, steps: tick } = steps({ reconcile: bundlerDown });
    await expect(chainTick(tick)).rejects.toBe(bundlerDown);
    expect(ran).toEqual(["reconcile", "watch"]);
  });

  it("fails the tick with both errors when the reconcile and the watcher fail", async () => {
    const bundlerDown = new Error("bundler down");
    const nodeDown = new Error("node down");
    const { ran, steps: tick } = steps({ reconcile: bundlerDown, watch: nodeDown });
    const failed = await chainTick(tick).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(failed).toBeInstanceOf(AggregateError);
    expect((failed as AggregateError).errors).toEqual([bundlerDown, nodeDown]);
    expect(ran).toEqual(["reconcile", "watch"]);
  });

  it("settles nothing when the watcher fails", async () => {
    const nodeDown = new Error("node down");
    const { ran, steps: tick } = steps({ watch: nodeDown });
    await expect(chainTick(tick)).rejects.toBe(nodeDown);
    expect(ran).toEqual(["reconcile", "watch"]);
  });
});
