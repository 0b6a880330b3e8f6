import { describe, expect, it } from "vitest";
import { coalescedLookup } from "./coalesced-lookup.ts";

// The lookup shared by concurrent requests: one load per round of I/O, answers by key, no cache.

function recordingStore(initial: Record<string, number>) {
  const rows = new Map(Object.entries(initial));
  const batches: string[][] = [];
  let failNext: Error | undefined;
  const lookup = coalescedLookup(async (keys: readonly string[]) => {
    batches.push([...keys]);
    if (failNext) {
      const err = failNext;
      failNext = undefined;
      throw err;
    }
    return new Map(keys.flatMap((key) => (rows.has(key) ? [[key, rows.get(key) as number] as const] : [])));
  });
  return {
    rows,
    batches,
    lookup,
    failOnce: (err: Error) => {
      failNext = err;
    },
  };
}

describe("coalescedLookup", () => {
  it("answers lookups asked for together with one load, each with its own key's row", async () => {
    const store = recordingStore({ a: 1, b: 2, c: 3 });
    const answers = await Promise.all(["a", "b", "c", "a", "missing"].map((key) => store.lookup(key)));
    expect(answers).toEqual([1, 2, 3, 1, undefined]);
    expect(store.batches).toHaveLength(1);
    expect(store.batches[0]).toEqual(expect.arrayContaining(["a", "b", "c", "missing"]));
  });

  it("gathers lookups started by separate I/O callbacks of one round", async () => {
    const store = recordingStore({ a: 1, b: 2 });
    // Two callbacks of one phase of the event loop (the check phase: immediates queued together
    // always run in one). Not two timers: under load the clock can tick between their creation,
    // and they fall due in different rounds.
    const [first, second] = await Promise.all(
      ["a", "b"].map((key) => new Promise((resolve) => setImmediate(() => resolve(store.lookup(key))))),
    );
    expect([first, second]).toEqual([1, 2]);
    expect(store.batches).toHaveLength(1);
  });

  it("caches nothing: a lookup after a change reads the change", async () => {
    const store = recordingStore({ key: 1 });
    expect(await store.lookup("key")).toBe(1);
    store.rows.set("key", 2);
    expect(await store.lookup("key")).toBe(2);
    store.rows.delete("key");
    expect(await store.lookup("key")).toBeUndefined();
    expect(store.batches).toHaveLength(3);
  });

  it("fails every lookup of a batch whose load failed, and the next batch loads again", async () => {
    const store = recordingStore({ a: 1, b: 2 });
    store.failOnce(new Error("connection lost"));
    const failed = await Promise.allSettled([store.lookup("a"), store.lookup("b")]);
    expect(failed.map((r) => r.status)).toEqual(["rejected", "rejected"]);
    expect((failed[0] as PromiseRejectedResult).reason).toEqual(new Error("connection lost"));
    expect(await store.lookup("b")).toBe(2);
  });
});
