import { describe, expect, it } from "vitest";
import { coalescedCall, coalescedWrite } from "./coalesced-write.ts";

// Writes shared by concurrent requests: one statement per round of I/O; a failed batch is made
// again one write at a time, so only the write that cannot be made fails.

function recordingWriter(bad: Set<string> = new Set()) {
  const statements: string[][] = [];
  const written: string[] = [];
  const write = coalescedWrite(async (jobs: readonly string[]) => {
    statements.push([...jobs]);
    // Atomic, like one SQL statement: a bad job fails the whole batch and nothing is written.
    const wrong = jobs.find((job) => bad.has(job));
    if (wrong) throw new Error(`cannot write ${wrong}`);
    written.push(...jobs);
  });
  return { statements, written, write };
}

describe("coalescedWrite", () => {
  it("makes the writes asked for together with one statement, and answers each after it", async () => {
    const w = recordingWriter();
    await Promise.all(["a", "b", "c"].map((job) => w.write(job)));
    expect(w.statements).toEqual([["a", "b", "c"]]);
    expect(w.written).toEqual(["a", "b", "c"]);
    await w.write("d");
    expect(w.statements).toHaveLength(2);
  });

  it("when a batch fails, makes each write alone: only the bad one fails, nothing is written twice", async () => {
    const w = recordingWriter(new Set(["b"]));
    const results = await Promise.allSettled(["a", "b", "c"].map((job) => w.write(job)));
    expect(results.map((r) => r.status)).toEqual(["fulfilled", "rejected", "fulfilled"]);
    expect((results[1] as PromiseRejectedResult).reason).toEqual(new Error("cannot write b"));
    expect(w.statements).toEqual([["a", "b", "c"], ["a"], ["b"], ["c"]]);
    expect(w.written.sort()).toEqual(["a", "c"]);
  });

  it("fails a write alone with its own error", async () => {
    const w = recordingWriter(new Set(["x"]));
    await expect(w.write("x")).rejects.toThrow("cannot write x");
    expect(w.statements).toEqual([["x"]]);
  });
});

describe("coalescedCall", () => {
  it("answers each write of a shared statement with its own answer, in order", async () => {
    const statements: number[][] = [];
    const double = coalescedCall(async (jobs: readonly number[]) => {
      statements.push([...jobs]);
      return jobs.map((job) => job * 2);
    });
    expect(await Promise.all([1, 2, 3].map((job) => double(job)))).toEqual([2, 4, 6]);
    expect(statements).toEqual([[1, 2, 3]]);
  });

  it("treats a statement that answers the wrong number of writes as failed", async () => {
    const statements: number[][] = [];
    const short = coalescedCall(async (jobs: readonly number[]) => {
      statements.push([...jobs]);
      return jobs.length > 1 ? [0] : [jobs[0] ?? 0];
    });
    expect(await Promise.all([5, 6].map((job) => short(job)))).toEqual([5, 6]);
    expect(statements).toEqual([[5, 6], [5], [6]]);
  });
});
