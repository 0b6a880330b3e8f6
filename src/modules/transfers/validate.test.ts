import { randomUUID } from "node:crypto";
import { CompiledQuery } from "kysely";
import { describe, expect, it } from "vitest";
import type { Hex } from "../../chain/network.ts";
import { InvalidRequest } from "../../domain/errors.ts";
import type { Fence } from "../../platform/db/fences.ts";
import type { TransferOrder } from "./order.ts";
import { assertWellFormed, orderProblem } from "./validate.ts";

// The engine's own checks of an order (validate.ts): the refusal a user can cause (the zero
// address) and the orderer bugs it throws on. Pure: no database.

const ZERO = "0x0000000000000000000000000000000000000000";
const FROM: Hex = "0x2222222222222222222222222222222222222222";

function order(overrides: Partial<TransferOrder> = {}): TransferOrder {
  return {
    id: randomUUID(),
    kind: "payout",
    scope: { workspaceId: randomUUID(), environment: "sandbox" },
    tokenSymbol: "USDC",
    amount: 1_000_000n,
    destinationAddress: "0x3333333333333333333333333333333333333333",
    walletType: null,
    network: null,
    ...overrides,
  };
}

// Never run: assertWellFormed only looks at whether there are fences.
const fence: Fence = { name: "claim", statement: CompiledQuery.raw("SELECT 1"), required: true };

describe("orderProblem", () => {
  it("refuses the zero address as destination with an InvalidRequest naming destinationAddress", () => {
    const problem = orderProblem(order({ destinationAddress: ZERO }));
    expect(problem).toBeInstanceOf(InvalidRequest);
    expect(problem?.code).toBe("INVALID_REQUEST");
    expect(problem?.message).toBe("destinationAddress must not be the zero address");
  });

  it("refuses an amount of zero or below (which the table's CHECK would answer as a fault)", () => {
    for (const amount of [0n, -1n]) {
      const problem = orderProblem(order({ amount }));
      expect(problem).toBeInstanceOf(InvalidRequest);
      expect(problem?.message).toBe("amount must be greater than zero");
    }
  });

  it("accepts a normal order, and an address that merely ends in zeros", () => {
    expect(orderProblem(order())).toBeNull();
    expect(orderProblem(order({ destinationAddress: `0x1${"0".repeat(39)}` }))).toBeNull();
    // The sandbox failure address is a real destination for the engine (it fails later, on the ledger).
    expect(
      orderProblem(order({ destinationAddress: "0x000000000000000000000000000000000000dEaD" })),
    ).toBeNull();
  });
});

describe("assertWellFormed", () => {
  it("throws on fences together with an idempotencyKey", () => {
    expect(() => assertWellFormed(order({ fences: [fence], idempotencyKey: "key-1" }))).toThrow(
      "a fenced transfer cannot carry a payout key",
    );
  });

  it("accepts fences alone, a key alone, and an empty fence list with a key", () => {
    expect(() => assertWellFormed(order({ fences: [fence] }))).not.toThrow();
    expect(() => assertWellFormed(order({ idempotencyKey: "key-2" }))).not.toThrow();
    expect(() => assertWellFormed(order({ fences: [], idempotencyKey: "key-3" }))).not.toThrow();
  });

  it("throws on empty legs and accepts legs with at least one", () => {
    expect(() => assertWellFormed(order({ legs: { from: FROM, legs: [] } }))).toThrow(
      "a transfer's legs cannot be empty",
    );
    const leg = { token: "USDC" as const, to: FROM, amount: 1n, purpose: "swap" };
    expect(() => assertWellFormed(order({ legs: { from: FROM, legs: [leg] } }))).not.toThrow();
  });
});
