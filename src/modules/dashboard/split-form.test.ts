import { describe, expect, it } from "vitest";
import type { SettlementAnswer } from "../payments/settlement/settlements-service.ts";
import { bpsToPercent, formOf, percentToBps, readSplitsForm, refusalOf, toRequest } from "./split-form.ts";
import { settlementLegs } from "./views/splits.ts";

describe("the splits form", () => {
  it("converts a percent with at most 2 decimals to basis points exactly, and back", () => {
    expect(percentToBps("12.5")).toBe(1250);
    expect(percentToBps("12.50")).toBe(1250);
    expect(percentToBps(" 0.01 ")).toBe(1);
    expect(percentToBps("100")).toBe(10000);
    expect(percentToBps("33.33 %")).toBe(3333);
    expect(percentToBps("0.29")).toBe(29); // 0.29 * 100 is 28.999999999999996 in floating point
    for (const bad of ["", "12.345", "1e2", "-1", "12,5", ".5", "1000.5", "abc", "0x10"])
      expect(percentToBps(bad), bad).toBeNull();
    for (let bps = 1; bps <= 10000; bps++) expect(percentToBps(bpsToPercent(bps))).toBe(bps);
    expect([bpsToPercent(1250), bpsToPercent(5), bpsToPercent(50), bpsToPercent(10000)]).toEqual([
      "12.5",
      "0.05",
      "0.5",
      "100",
    ]);
  });

  it("leaves out blank and removed rows, and maps the service's split index back to the row shown", () => {
    const form = readSplitsForm({
      rows: "4",
      enabled: "on",
      "label-0": "A",
      "percent-0": "1",
      "destination-0": " 0x1 ",
      "enabled-0": "on",
      "label-1": "",
      "percent-1": "",
      "destination-1": "",
      "label-2": "B",
      "percent-2": "2",
      "destination-2": "0x2",
      "remove-2": "on",
      "label-3": "C",
      "percent-3": "3.5",
      "destination-3": "0x3",
    });
    const sent = toRequest(form);
    expect(sent).toEqual({
      ok: true,
      body: {
        enabled: true,
        splits: [
          { label: "A", percentBps: 100, destination: "0x1", enabled: true },
          { label: "C", percentBps: 350, destination: "0x3", enabled: false },
        ],
      },
      rowOf: [0, 3],
    });
    if (!sent.ok) return;
    expect(refusalOf("splits[1].destination must be an address", sent.rowOf)).toEqual({
      message: "Split 4: splits[1].destination must be an address",
      row: 3,
      field: "destination",
    });
    expect(refusalOf("splits: the enabled splits' percentBps sum to 10001", sent.rowOf)).toEqual({
      message: "splits: the enabled splits' percentBps sum to 10001",
    });
  });

  it("never shows more than 10 rows, and reads no more than the form's count", () => {
    const splits = Array.from({ length: 9 }, (_, i) => ({
      id: `${i}`,
      label: `S${i}`,
      percentBps: 10,
      destination: "0x1",
      enabled: true,
      createdAt: "",
    }));
    expect(formOf({ enabled: true, splits }).rows).toHaveLength(10);
    expect(formOf({ enabled: false, splits: [] }).rows).toHaveLength(3);
    expect(readSplitsForm({ rows: "99" }).rows).toHaveLength(10);
    expect(readSplitsForm({ rows: "2", "label-5": "x" }).rows).toHaveLength(2);
  });
});

describe("a settlement's legs", () => {
  const settlement: SettlementAnswer = {
    settlementId: "6b1b2c3d-0000-4000-8000-000000000001",
    paymentIds: ["6b1b2c3d-0000-4000-8000-000000000002"],
    network: "sandbox-a",
    tokenSymbol: "USDC",
    grossAmount: "100.00",
    feeAmount: "1.50",
    netAmount: "98.50",
    merchantAmount: "86.1875",
    merchantWallet: "0x1111111111111111111111111111111111111111",
    txRef: `0x${"a".repeat(64)}`,
    splits: [
      {
        splitId: "s1",
        label: "<b>Partner</b>",
        amount: "12.3125",
        percent_bps: 1250,
        destination: "0x2222222222222222222222222222222222222222",
        status: "failed",
        txRef: null,
      },
    ],
    createdAt: "2025-01-01T00:00:00.000Z",
  };

  it("links each transaction to the environment's explorer, and escapes the labels", () => {
    const out = String(settlementLegs(settlement, "https://explorer.example"));
    expect(out).toContain(`href="https:&#x2F;&#x2F;explorer.example&#x2F;tx&#x2F;0x${"a".repeat(64)}"`);
    expect(out).toContain('&lt;b&gt;Partner&lt;&#x2F;b&gt; <span class="muted">(12.5%)</span>');
    expect(out).toContain('status-failed">failed');
    expect(out).not.toContain("<b>");
    expect(String(settlementLegs(settlement, null))).not.toContain("href=");
  });
});
