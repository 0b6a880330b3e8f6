import { describe, expect, it } from "vitest";
import type { AppContext } from "../../context.ts";
import { AttemptRecorder } from "./recorder.ts";
import type { AttemptRecord } from "./repo.ts";

function record(deliveryId: string): AttemptRecord {
  return {
    deliveryId,
    endpointId: 1,
    lease: new Date(0),
    at: new Date(0),
    delivered: true,
    responseCode: 200,
    error: null,
    nextAttemptAt: null,
  };
}

function fakeLog() {
  const lines: Array<{ level: string; obj: Record<string, unknown>; msg: string }> = [];
  const at =
    (level: string) =>
    (obj: Record<string, unknown>, msg: string): void => {
      lines.push({ level, obj, msg });
    };
  return { lines, log: { warn: at("warn"), error: at("error") } as unknown as AppContext["log"] };
}

describe("AttemptRecorder", () => {
  it("writes the outcomes that end together in one batch, and those that end meanwhile in the next", async () => {
    const batches: string[][] = [];
    let release: () => void = () => {};
    const recorder = new AttemptRecorder(async (records) => {
      batches.push(records.map((r) => r.deliveryId));
      if (batches.length === 1) await new Promise<void>((done) => (release = done));
      return new Set(records.map((r) => r.deliveryId));
    }, fakeLog().log);

    const first = [recorder.record(record("a")), recorder.record(record("b"))];
    await new Promise((done) => setImmediate(done));
    expect(batches).toEqual([["a", "b"]]);
    // While the first batch is being written, more outcomes arrive: they wait for the next one.
    const second = [recorder.record(record("c")), recorder.record(record("d"))];
    await new Promise((done) => setImmediate(done));
    expect(batches).toHaveLength(1);
    release();
    await Promise.all([...first, ...second]);
    expect(batches).toEqual([
      ["a", "b"],
      ["c", "d"],
    ]);
  });

  it("waits for the write before resolving, and warns about outcomes whose lease was lost", async () => {
    const { lines, log } = fakeLog();
    let written = false;
    const recorder = new AttemptRecorder(async () => {
      await new Promise((done) => setTimeout(done, 20));
      written = true;
      return new Set(["kept"]);
    }, log);
    await Promise.all([recorder.record(record("kept")), recorder.record(record("taken-over"))]);
    expect(written).toBe(true);
    expect(lines).toEqual([
      {
        level: "warn",
        obj: { deliveryId: "taken-over" },
        msg: "webhook delivery lease lost; outcome not recorded",
      },
    ]);
  });

  it("resolves (never rejects) when a batch cannot be written, logs it, and writes later batches", async () => {
    const { lines, log } = fakeLog();
    let calls = 0;
    const recorder = new AttemptRecorder(async (records) => {
      calls += 1;
      if (calls === 1) throw new Error("connection lost");
      return new Set(records.map((r) => r.deliveryId));
    }, log);
    await expect(Promise.all([recorder.record(record("a")), recorder.record(record("b"))])).resolves.toEqual([
      undefined,
      undefined,
    ]);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ level: "error", obj: { deliveryIds: ["a", "b"] } });

    await recorder.record(record("c"));
    expect(calls).toBe(2);
    expect(lines).toHaveLength(1);
  });
});
