import { text } from "node:stream/consumers";
import { setImmediate as tick } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import { type CsvRecord, csvStream, inBatches } from "./csv.ts";

// The CSV stream of exports (D18): RFC 4180 text, formula cells defused, pulled at the reader's pace.

describe("csvStream", () => {
  it("writes a header row and records, CRLF-delimited, quoting and doubling as RFC 4180 says", async () => {
    const rows: CsvRecord[] = [
      { a: "plain", b: null, c: undefined },
      { a: 'say "hi", twice', b: "line\nbreak", c: "carriage\rreturn" },
      { a: "ünïcødé 💸", b: "", c: "x" },
    ];
    expect(await text(csvStream(["a", "b", "c"], rows))).toBe(
      'a,b,c\r\nplain,,\r\n"say ""hi"", twice","line\nbreak","carriage\rreturn"\r\nünïcødé 💸,,x\r\n',
    );
  });

  it("prefixes ' to cells beginning with = + - @ (and tab), quoting them when they need it", async () => {
    const rows: CsvRecord[] = [
      { v: "=SUM(A1:A9)" },
      { v: "+1" },
      { v: "-1" },
      { v: "@cmd" },
      { v: "\tx" },
      { v: '=HYPERLINK("http://x", "y")' },
      { v: "a=b" },
    ];
    expect(await text(csvStream(["v"], rows))).toBe(
      'v\r\n\'=SUM(A1:A9)\r\n\'+1\r\n\'-1\r\n\'@cmd\r\n\'\tx\r\n"\'=HYPERLINK(""http://x"", ""y"")"\r\na=b\r\n',
    );
  });

  it("is the header row alone when there are no rows", async () => {
    expect(await text(csvStream(["id", "status"], []))).toBe("id,status\r\n");
  });

  it("pulls rows only as the reader takes them (constant memory for any export)", async () => {
    let pulled = 0;
    async function* endless(): AsyncGenerator<CsvRecord> {
      for (;;) {
        pulled += 1;
        yield { v: "x".repeat(100) };
      }
    }
    const stream = csvStream(["v"], endless());
    for (let i = 0; i < 50; i += 1) await tick();
    // Nobody reads: the source stops once the buffers (16 objects, 64 KiB of text) are full.
    expect(pulled).toBeGreaterThan(0);
    expect(pulled).toBeLessThan(1000);
    const first = pulled;
    stream.read();
    for (let i = 0; i < 50; i += 1) await tick();
    expect(pulled).toBeGreaterThan(first);
    expect(pulled).toBeLessThan(2000);
    stream.destroy();
  });

  it("fails the stream when its rows fail, so a cut download never looks complete", async () => {
    async function* failing(): AsyncGenerator<CsvRecord> {
      yield { v: "1" };
      throw new Error("database went away");
    }
    await expect(text(csvStream(["v"], failing()))).rejects.toThrow("database went away");
  });
});

describe("inBatches", () => {
  it("asks for each batch after the last row of the previous one, until a short batch", async () => {
    const data = Array.from({ length: 7 }, (_, i) => i);
    const asked: Array<number | undefined> = [];
    const rows = inBatches<number>(3, async (last, size) => {
      asked.push(last);
      const start = last === undefined ? 0 : last + 1;
      return data.slice(start, start + size);
    });
    const seen: number[] = [];
    for await (const row of rows) seen.push(row);
    expect(seen).toEqual(data);
    expect(asked).toEqual([undefined, 2, 5]);
  });

  it("reads a batch only when the previous one has been consumed", async () => {
    let batches = 0;
    const rows = inBatches<number>(2, async () => {
      batches += 1;
      return [1, 2];
    });
    await rows.next();
    await rows.next();
    expect(batches).toBe(1);
    await rows.next();
    expect(batches).toBe(2);
    await rows.return(undefined);
  });

  it("asks once more after an exactly full last batch, and ends on the empty answer", async () => {
    const answers = [[1, 2], []];
    const rows = inBatches<number>(2, async () => answers.shift() ?? []);
    const seen: number[] = [];
    for await (const row of rows) seen.push(row);
    expect(seen).toEqual([1, 2]);
    expect(answers).toEqual([]);
  });
});
