import { CompiledQuery } from "kysely";
import { describe, expect, it } from "vitest";
import { releasesOf, type TransferKind, TransferKinds } from "./kinds.ts";
import type { TransferRow } from "./repo.ts";

// What the transaction failing a transfer writes for its kind (kinds.ts releasesOf): what its
// record took elsewhere, always; its orderer's claim, only when nothing was sent.

const row = { id: "t-1", payment_id: "p-1" } as Pick<TransferRow, "id" | "payment_id">;
const statement = (text: string) => (r: TransferRow) => [CompiledQuery.raw(`${text} ${r.id}`)];

const kind = (extra: Partial<TransferKind>): TransferKind => ({
  completedEvent: null,
  failedEvent: null,
  view: () => ({}),
  announcesNeverSent: false,
  failureDetails: () => ({}),
  ...extra,
});
const sqlOf = (k: TransferKind, unsent: boolean) =>
  releasesOf(k, row as TransferRow, unsent).map((q) => q.sql);

describe("releasesOf", () => {
  it("gives back what the record took, sent or not", () => {
    const k = kind({ releases: statement("give back") });
    expect(sqlOf(k, false)).toEqual(["give back t-1"]);
    expect(sqlOf(k, true)).toEqual(["give back t-1"]);
  });

  it("gives the orderer its claim back only when nothing was sent, after the releases", () => {
    const k = kind({ releases: statement("give back"), releasesUnsent: statement("claim back") });
    expect(sqlOf(k, false)).toEqual(["give back t-1"]);
    expect(sqlOf(k, true)).toEqual(["give back t-1", "claim back t-1"]);
  });

  it("writes nothing for a kind that took nothing", () => {
    expect(sqlOf(kind({}), true)).toEqual([]);
  });
});

describe("TransferKinds", () => {
  it("refuses a kind nobody described", () => {
    const kinds = new TransferKinds({
      payout: kind({}),
      refund: kind({}),
      return: kind({}),
      swap: kind({}),
      settlement: kind({}),
    });
    expect(kinds.of("payout").completedEvent).toBeNull();
    expect(() => kinds.of("gift")).toThrow(/no transfer kind "gift"/);
  });
});
