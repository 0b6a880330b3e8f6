import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  carve,
  checkSplitConfig,
  MAX_LABEL,
  MAX_SPLITS,
  replaceSplits,
  type StoredSplit,
  snapshotOf,
  WHOLE_BPS,
} from "./splits.ts";

// Splits (D15): the rules of a configuration (each refusal names its field), the replacement that
// keeps ids by label, the snapshot a payment keeps, and the carving of a net into its parts.

const A = "0xaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const B = "0xbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
const C = "0xcccccccccccccccccccccccccccccccccccccccc";

const split = (label: string, percentBps = 100, destination = A, extra: Record<string, unknown> = {}) => ({
  label,
  percentBps,
  destination,
  ...extra,
});

/** The refusal's message; fails the test when the body was accepted. */
function refusal(body: unknown): string {
  const checked = checkSplitConfig(body);
  if (checked.ok) throw new Error(`accepted ${JSON.stringify(body)}`);
  return checked.message;
}

describe("checkSplitConfig: accepted configurations", () => {
  it("accepts no splits, enabled or not", () => {
    expect(checkSplitConfig({ enabled: false, splits: [] })).toEqual({
      ok: true,
      value: { enabled: false, splits: [] },
    });
    expect(checkSplitConfig({ enabled: true, splits: [] })).toEqual({
      ok: true,
      value: { enabled: true, splits: [] },
    });
  });

  it("defaults a split's enabled to true, keeps an explicit false, and lower-cases the destination", () => {
    const checked = checkSplitConfig({
      enabled: true,
      splits: [
        split("Partner", 2500, "0xABCDEFabcdefABCDEFabcdefABCDEFabcdefABCD"),
        split("Off", 300, B, { enabled: false }),
      ],
    });
    expect(checked).toEqual({
      ok: true,
      value: {
        enabled: true,
        splits: [
          {
            label: "Partner",
            percentBps: 2500,
            destination: "0xabcdefabcdefabcdefabcdefabcdefabcdefabcd",
            enabled: true,
          },
          { label: "Off", percentBps: 300, destination: B, enabled: false },
        ],
      },
    });
  });

  it("accepts the bounds: 10 splits, labels of 1 and 100 characters, 1 and 10000 bps", () => {
    const ten = Array.from({ length: MAX_SPLITS }, (_, i) => split(`s${i}`, 1));
    expect(checkSplitConfig({ enabled: true, splits: ten }).ok).toBe(true);
    expect(checkSplitConfig({ enabled: true, splits: [split("x", 1)] }).ok).toBe(true);
    expect(checkSplitConfig({ enabled: true, splits: [split("y".repeat(MAX_LABEL), WHOLE_BPS)] }).ok).toBe(
      true,
    );
  });

  it("lets the enabled splits sum to exactly 10000, disabled ones not counted", () => {
    const body = {
      enabled: true,
      splits: [
        split("a", 3333),
        split("b", 3333),
        split("c", 3334),
        split("off", 9000, C, { enabled: false }),
      ],
    };
    expect(checkSplitConfig(body).ok).toBe(true);
  });
});

describe("checkSplitConfig: every rule refuses, naming the field", () => {
  it.each([null, [], "splits", 42, true])("refuses a body that is not an object: %j", (body) => {
    expect(refusal(body)).toMatch(/^body /);
  });

  it("refuses an unknown top-level field, naming it", () => {
    expect(refusal({ enabled: true, splits: [], extra: 1 })).toMatch(/^extra /);
  });

  it.each([undefined, "true", 1, null])("refuses enabled = %j", (enabled) => {
    const body: Record<string, unknown> = { splits: [] };
    if (enabled !== undefined) body.enabled = enabled;
    expect(refusal(body)).toMatch(/^enabled /);
  });

  it.each([undefined, null, {}, "[]", 3])("refuses splits = %j", (splits) => {
    const body: Record<string, unknown> = { enabled: true };
    if (splits !== undefined) body.splits = splits;
    expect(refusal(body)).toMatch(/^splits /);
  });

  it("refuses more than 10 splits", () => {
    const eleven = Array.from({ length: MAX_SPLITS + 1 }, (_, i) => split(`s${i}`, 1));
    const message = refusal({ enabled: true, splits: eleven });
    expect(message).toMatch(/^splits /);
    expect(message).toContain("10");
  });

  it.each([null, "x", 5, [split("a")]])("refuses a split that is not an object: %j", (item) => {
    expect(refusal({ enabled: true, splits: [split("ok"), item] })).toMatch(/^splits\[1\] /);
  });

  it("refuses an unknown field of a split, naming it", () => {
    expect(refusal({ enabled: true, splits: [split("a", 1, A, { percent: 5 })] })).toMatch(
      /^splits\[0\]\.percent /,
    );
  });

  it.each([
    ["missing", undefined],
    ["empty", ""],
    ["blank", "   "],
    ["101 characters", "z".repeat(MAX_LABEL + 1)],
    ["a number", 7],
    ["null", null],
  ])("refuses a label that is %s", (_, label) => {
    const item: Record<string, unknown> = { percentBps: 100, destination: A };
    if (label !== undefined) item.label = label;
    expect(refusal({ enabled: true, splits: [split("first"), item] })).toMatch(/^splits\[1\]\.label /);
  });

  it("refuses a label used twice, even by a disabled split", () => {
    const message = refusal({
      enabled: true,
      splits: [split("Partner", 100, A), split("Partner", 200, B, { enabled: false })],
    });
    expect(message).toMatch(/^splits\[1\]\.label /);
    expect(message).toContain("unique");
  });

  it.each([
    ["missing", undefined],
    ["0", 0],
    ["negative", -1],
    ["10001", WHOLE_BPS + 1],
    ["fractional", 1.5],
    ["a string", "100"],
    ["NaN", Number.NaN],
    ["Infinity", Number.POSITIVE_INFINITY],
    ["null", null],
  ])("refuses percentBps %s", (_, percentBps) => {
    const item: Record<string, unknown> = { label: "x", destination: A };
    if (percentBps !== undefined) item.percentBps = percentBps;
    expect(refusal({ enabled: true, splits: [item] })).toMatch(/^splits\[0\]\.percentBps /);
  });

  it.each([
    ["missing", undefined],
    ["too short", "0x1234"],
    ["41 hex digits", `${A}a`],
    ["without 0x", A.slice(2)],
    ["not hex", `0x${"g".repeat(40)}`],
    ["with spaces", ` ${A}`],
    ["a number", 123],
    ["the zero address", `0x${"0".repeat(40)}`],
  ])("refuses a destination %s", (_, destination) => {
    const item: Record<string, unknown> = { label: "x", percentBps: 100 };
    if (destination !== undefined) item.destination = destination;
    expect(refusal({ enabled: true, splits: [item] })).toMatch(/^splits\[0\]\.destination /);
  });

  it("names the zero address as such", () => {
    expect(refusal({ enabled: true, splits: [split("x", 1, `0x${"0".repeat(40)}`)] })).toContain("zero");
  });

  it.each([null, "yes", 1])("refuses a split's enabled = %j", (enabled) => {
    expect(refusal({ enabled: true, splits: [split("x", 1, A, { enabled })] })).toMatch(
      /^splits\[0\]\.enabled /,
    );
  });

  it("refuses enabled splits summing to more than 10000", () => {
    const message = refusal({ enabled: true, splits: [split("a", 5000), split("b", 5001, B)] });
    expect(message).toMatch(/^splits/);
    expect(message).toContain("percentBps");
    expect(message).toContain("10001");
  });

  it("counts the enabled splits even when the configuration itself is disabled", () => {
    expect(refusal({ enabled: false, splits: [split("a", 6000), split("b", 6000, B)] })).toMatch(/^splits/);
  });
});

describe("replaceSplits", () => {
  const before: StoredSplit[] = [
    {
      id: "id-a",
      label: "A",
      percentBps: 100,
      destination: A,
      enabled: true,
      createdAt: "2024-01-01T00:00:00.000Z",
    },
    {
      id: "id-b",
      label: "B",
      percentBps: 200,
      destination: B,
      enabled: true,
      createdAt: "2024-02-01T00:00:00.000Z",
    },
  ];
  const now = new Date("2025-06-01T12:00:00.000Z");

  it("keeps the id and creation time of a label configured before, takes the new values, gives new labels new ids", () => {
    let n = 0;
    const next = replaceSplits(
      before,
      [
        { label: "C", percentBps: 50, destination: C, enabled: true },
        { label: "B", percentBps: 999, destination: C, enabled: false },
      ],
      () => `new-${++n}`,
      now,
    );
    expect(next).toEqual([
      {
        id: "new-1",
        label: "C",
        percentBps: 50,
        destination: C,
        enabled: true,
        createdAt: "2025-06-01T12:00:00.000Z",
      },
      {
        id: "id-b",
        label: "B",
        percentBps: 999,
        destination: C,
        enabled: false,
        createdAt: "2024-02-01T00:00:00.000Z",
      },
    ]);
    expect(n).toBe(1);
  });

  it("drops the labels no longer configured; a label is matched exactly (case matters)", () => {
    let n = 0;
    const next = replaceSplits(
      before,
      [{ label: "a", percentBps: 100, destination: A, enabled: true }],
      () => `new-${++n}`,
      now,
    );
    expect(next.map((s) => s.id)).toEqual(["new-1"]);
    expect(replaceSplits(before, [], () => "never", now)).toEqual([]);
  });
});

describe("snapshotOf", () => {
  const stored: StoredSplit[] = [
    { id: "1", label: "one", percentBps: 100, destination: A, enabled: true, createdAt: "x" },
    { id: "2", label: "two", percentBps: 200, destination: B, enabled: false, createdAt: "x" },
    { id: "3", label: "three", percentBps: 300, destination: C, enabled: true, createdAt: "x" },
  ];

  it("is null when never configured or when splits are off", () => {
    expect(snapshotOf(undefined)).toBeNull();
    expect(snapshotOf({ enabled: false, splits: stored })).toBeNull();
  });

  it("keeps only the enabled splits, in order, with what the settlement needs", () => {
    expect(snapshotOf({ enabled: true, splits: stored })).toEqual([
      { splitId: "1", label: "one", percentBps: 100, destination: A },
      { splitId: "3", label: "three", percentBps: 300, destination: C },
    ]);
  });

  it("is an empty list (not null) when splits are on but none is enabled", () => {
    expect(snapshotOf({ enabled: true, splits: [] })).toEqual([]);
    expect(snapshotOf({ enabled: true, splits: stored.map((s) => ({ ...s, enabled: false })) })).toEqual([]);
  });
});

describe("carve", () => {
  it("carves 98.50 USDC by hand-computed parts", () => {
    // 98 500 000 units: 25% = 24 625 000; 3.33% = 3 280 050; 0.07% = 68 950; the merchant the rest.
    expect(carve(98_500_000n, [{ percentBps: 2500 }, { percentBps: 333 }, { percentBps: 7 }])).toEqual({
      merchant: 70_526_000n,
      amounts: [24_625_000n, 3_280_050n, 68_950n],
    });
  });

  it("rounds each part down and leaves the dust to the merchant", () => {
    // 1 216 048 × 3333 / 10000 = 405 308.7984; × 3334 / 10000 = 405 430.4032.
    expect(carve(1_216_048n, [{ percentBps: 3333 }, { percentBps: 3333 }, { percentBps: 3334 }])).toEqual({
      merchant: 2n,
      amounts: [405_308n, 405_308n, 405_430n],
    });
    expect(carve(9_999n, [{ percentBps: 1 }])).toEqual({ merchant: 9_999n, amounts: [0n] });
    expect(carve(10_000n, [{ percentBps: 1 }])).toEqual({ merchant: 9_999n, amounts: [1n] });
  });

  it("gives the merchant the whole net without shares, and nothing of a zero net", () => {
    expect(carve(123n, [])).toEqual({ merchant: 123n, amounts: [] });
    expect(carve(0n, [{ percentBps: 5000 }])).toEqual({ merchant: 0n, amounts: [0n] });
  });

  it("refuses a negative net and shares over 10000 bps", () => {
    expect(() => carve(-1n, [])).toThrow(RangeError);
    expect(() => carve(100n, [{ percentBps: 5000 }, { percentBps: 5001 }])).toThrow(RangeError);
  });

  it("property: parts sum to the net, none negative, each floor(net × bps / 10000)", () => {
    // 0 to 10 shares, each 1..10000 bps, scaled down so they sum to at most 10000.
    const shares = fc
      .array(fc.integer({ min: 1, max: WHOLE_BPS }), { minLength: 0, maxLength: MAX_SPLITS })
      .chain((bps) => {
        const total = bps.reduce((a, b) => a + b, 0);
        if (total <= WHOLE_BPS) return fc.constant(bps);
        // Scale each down (at least 1) and check the bound holds; fall back to ones.
        const scaled = bps.map((b) => Math.max(1, Math.floor((b * WHOLE_BPS) / total)));
        const sum = scaled.reduce((a, b) => a + b, 0);
        return fc.constant(sum <= WHOLE_BPS ? scaled : bps.map(() => 1));
      });
    const nets = fc.oneof(
      fc.bigInt({ min: 0n, max: 2n ** 128n }),
      fc.bigInt({ min: 0n, max: 20_000n }),
      fc.constantFrom(0n, 1n, 9_999n, 10_000n, 2n ** 128n),
    );
    fc.assert(
      fc.property(nets, shares, (net, bps) => {
        expect(bps.reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(WHOLE_BPS);
        const { merchant, amounts } = carve(
          net,
          bps.map((percentBps) => ({ percentBps })),
        );
        expect(amounts).toHaveLength(bps.length);
        expect(merchant + amounts.reduce((a, b) => a + b, 0n)).toBe(net);
        expect(merchant >= 0n).toBe(true);
        bps.forEach((b, i) => {
          const amount = amounts[i] as bigint;
          expect(amount >= 0n).toBe(true);
          expect(amount).toBe((net * BigInt(b)) / 10_000n);
          // floor: amount × 10000 ≤ net × bps < (amount + 1) × 10000
          expect(amount * 10_000n <= net * BigInt(b)).toBe(true);
          expect((amount + 1n) * 10_000n > net * BigInt(b)).toBe(true);
        });
      }),
      { numRuns: 2000 },
    );
  });

  it("property: shares summing to exactly 10000 leave the merchant less than one unit per share", () => {
    const whole = fc
      .array(fc.integer({ min: 1, max: 1000 }), { minLength: 1, maxLength: MAX_SPLITS })
      .map((weights) => {
        // Distribute 10000 bps over the shares in proportion to the weights, the rest to the last.
        const total = weights.reduce((a, b) => a + b, 0);
        const bps = weights.map((w) => Math.max(1, Math.floor((w * (WHOLE_BPS - weights.length)) / total)));
        const used = bps.reduce((a, b) => a + b, 0);
        bps[bps.length - 1] = (bps[bps.length - 1] as number) + (WHOLE_BPS - used);
        return bps;
      });
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: 2n ** 128n }), whole, (net, bps) => {
        expect(bps.reduce((a, b) => a + b, 0)).toBe(WHOLE_BPS);
        const { merchant } = carve(
          net,
          bps.map((percentBps) => ({ percentBps })),
        );
        expect(merchant >= 0n && merchant < BigInt(bps.length)).toBe(true);
      }),
      { numRuns: 1000 },
    );
  });
});
