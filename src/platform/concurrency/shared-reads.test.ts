import { describe, expect, it } from "vitest";
import { SharedReads } from "./shared-reads.ts";

/** A read that answers (or fails) when the test says. */
function heldRead<V>() {
  let answer!: (value: V) => void;
  let fail!: (err: Error) => void;
  const promise = new Promise<V>((resolve, reject) => {
    answer = resolve;
    fail = reject;
  });
  return { promise, answer, fail };
}

describe("SharedReads", () => {
  it("shares a key's read while it is in flight and reads again once it is answered", async () => {
    const reads = new SharedReads<number>();
    let began = 0;
    const first = heldRead<number>();
    const read = () => {
      began += 1;
      return began === 1 ? first.promise : Promise.resolve(began);
    };
    const a = reads.share("wallet", read);
    const b = reads.share("wallet", read);
    expect(began).toBe(1);
    first.answer(7);
    expect(await a).toBe(7);
    expect(await b).toBe(7);
    expect(await reads.share("wallet", read)).toBe(2);
    expect(began).toBe(2);
  });

  it("keeps keys apart", async () => {
    const reads = new SharedReads<string>();
    const [a, b] = await Promise.all([
      reads.share("a", async () => "read of a"),
      reads.share("b", async () => "read of b"),
    ]);
    expect([a, b]).toEqual(["read of a", "read of b"]);
  });

  it("fails every sharer of a failed read, and the next caller reads afresh", async () => {
    const reads = new SharedReads<number>();
    const held = heldRead<number>();
    const a = reads.share("wallet", () => held.promise);
    const b = reads.share("wallet", () => Promise.resolve(0));
    held.fail(new Error("node down"));
    await expect(a).rejects.toThrow("node down");
    await expect(b).rejects.toThrow("node down");
    await expect(reads.share("wallet", async () => 5)).resolves.toBe(5);
  });
});
