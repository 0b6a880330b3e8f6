import { describe, expect, it } from "vitest";
import type { BlockRef } from "../../src/chain/network.ts";
import { planInboxCheck } from "../../src/modules/payments/incoming/inbox-check.ts";

// The watcher's check of the unmatched inbox against the chain (issue 39, item 3), as a pure plan:
// what each open or dropped transfer becomes given where its transaction is now. The devnet
// suite (inbox-on-chain.test.ts) drops and re-mines a real transaction.

const block = (number: bigint): BlockRef => ({ number, hash: `0x${number.toString(16).padStart(64, "0")}` });
const row = (id: string, status: "open" | "dropped", at: bigint) => ({
  id,
  status,
  block_number: at.toString(),
});

describe("planInboxCheck", () => {
  it("an open transfer under the confirmations is confirmed at the block it is in now", () => {
    // head 12, block 10: 3 confirmations, 3 required.
    expect(planInboxCheck([row("a", "open", 10n)], [block(10n)], 12n, 3)).toEqual({
      confirm: [{ id: "a", block: 10n }],
      move: [],
      drop: [],
      reopen: [],
    });
  });

  it("one short of them waits; in another block it records that block", () => {
    const plan = planInboxCheck(
      [row("a", "open", 11n), row("b", "open", 10n)],
      [block(11n), block(11n)],
      12n,
      3,
    );
    expect(plan).toEqual({ confirm: [], move: [{ id: "b", block: 11n }], drop: [], reopen: [] });
  });

  it("an open transfer in no block is dropped; a dropped one in a block again is reopened there, else left", () => {
    const plan = planInboxCheck(
      [row("a", "open", 10n), row("b", "dropped", 9n), row("c", "dropped", 8n)],
      [null, block(20n), null],
      30n,
      3,
    );
    // Reopened, not confirmed at once: the next check confirms it like any open transfer.
    expect(plan).toEqual({ confirm: [], move: [], drop: ["a"], reopen: [{ id: "b", block: 20n }] });
  });
});
