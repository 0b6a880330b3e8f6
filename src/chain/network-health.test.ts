import { describe, expect, it } from "vitest";
import type { BlockRef } from "./network.ts";
import { NetworkHealth } from "./network-health.ts";

// The answer a request gets about a network's node: one probe at a time, kept while fresh, a
// node that answered trusted while it is asked again, one that did not waited for. The node here
// is a head() the test answers by hand, so that each probe's timing is the test's.

const HEAD: BlockRef = { number: 1n, hash: "0x01" };

class HandNode {
  calls = 0;
  #pending: Array<(ok: boolean) => void> = [];

  head = (): Promise<BlockRef> => {
    this.calls++;
    return new Promise((resolve, reject) => {
      this.#pending.push((ok) => (ok ? resolve(HEAD) : reject(new Error("connection refused"))));
    });
  };

  answer(ok: boolean): void {
    for (const settle of this.#pending.splice(0)) settle(ok);
  }
}

describe("NetworkHealth", () => {
  it("asks once for requests arriving together, and keeps a fresh answer", async () => {
    const node = new HandNode();
    const health = new NetworkHealth(node, { freshMs: 60_000, timeoutMs: 60_000 });
    const asked = [health.answers(), health.answers(), health.answers()];
    expect(node.calls).toBe(1);
    node.answer(true);
    expect(await Promise.all(asked)).toEqual([true, true, true]);
    expect(await health.answers()).toBe(true);
    expect(node.calls).toBe(1);
  });

  it("keeps a node that did not answer down while the answer is fresh", async () => {
    const node = new HandNode();
    const health = new NetworkHealth(node, { freshMs: 60_000, timeoutMs: 60_000 });
    const first = health.answers();
    node.answer(false);
    expect(await first).toBe(false);
    expect(await health.answers()).toBe(false);
    expect(node.calls).toBe(1);
  });

  it("counts a probe with no answer in time as down", async () => {
    const node = new HandNode();
    const health = new NetworkHealth(node, { freshMs: 60_000, timeoutMs: 20 });
    expect(await health.answers()).toBe(false);
    node.answer(true); // too late: the answer kept is the timeout's
    expect(await health.answers()).toBe(false);
  });

  it("trusts a node that answered while a stale answer is asked again, and waits for one that did not", async () => {
    const node = new HandNode();
    const health = new NetworkHealth(node, { freshMs: 0, timeoutMs: 60_000 });
    const first = health.answers();
    node.answer(true);
    expect(await first).toBe(true);
    // Stale: answered at once from the last answer, while a probe asks again.
    expect(await health.answers()).toBe(true);
    expect(node.calls).toBe(2);
    node.answer(false);
    // The probe saw it down: the next request waits for a new probe's answer.
    await expect
      .poll(async () => {
        const next = health.answers();
        node.answer(false);
        return next;
      })
      .toBe(false);
    const recovering = health.answers();
    node.answer(true);
    expect(await recovering).toBe(true);
  });
});
