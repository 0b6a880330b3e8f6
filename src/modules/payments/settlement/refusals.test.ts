import { describe, expect, it } from "vitest";
import {
  CircuitBreakerOpen,
  InsufficientBalance,
  InsufficientGas,
  InvalidRequest,
  NetworkUnavailable,
} from "../../../domain/errors.ts";
import { NO_GAS, onRefusal, retriesShort } from "./refusals.ts";

// The settlement job's answer to the engine's refusal of its order (refusals.ts).

const short = new InsufficientBalance({
  available: "1.00",
  requested: "10.00",
  tokenSymbol: "USDC",
  network: "default",
});
const noGas = new InsufficientGas({ ethBalance: "0", required: "0.001", action: "top it up" }, 1_000n);

describe("onRefusal", () => {
  it("checks a wallet short of the money before failing anything", () => {
    expect(onRefusal(short, true)).toEqual({ step: "short", reason: short.message });
    expect(onRefusal(short, false)).toEqual({ step: "short", reason: short.message });
  });

  it("tops a wallet short of gas up by what it lacks, once", () => {
    expect(onRefusal(noGas, true)).toEqual({ step: "top_up", shortWei: 1_000n });
    expect(onRefusal(noGas, false)).toEqual({ step: "fail", reason: NO_GAS });
  });

  it("waits, failing nothing, while its network's node does not answer", () => {
    expect(onRefusal(new NetworkUnavailable("devnet-a"), true)).toEqual({
      step: "wait",
      reason: "Network unavailable",
    });
  });

  it("fails on any other refusal, with its message", () => {
    const invalid = new InvalidRequest("destinationAddress is not an address");
    expect(onRefusal(invalid, true)).toEqual({ step: "fail", reason: invalid.message });
    const paused = new CircuitBreakerOpen("paused", {});
    expect(onRefusal(paused, true)).toMatchObject({ step: "fail" });
  });
});

describe("retriesShort", () => {
  it("retries while the wallet holds what the payment brought in, and not below it", () => {
    expect(retriesShort(10n, 10n)).toBe(true);
    expect(retriesShort(11n, 10n)).toBe(true);
    expect(retriesShort(9n, 10n)).toBe(false);
  });
});
