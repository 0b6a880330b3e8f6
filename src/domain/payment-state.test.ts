import { describe, expect, it } from "vitest";
import {
  FINAL_STATUSES,
  isFinal,
  isVerified,
  PAYMENT_STATUSES,
  type PaymentStatus,
  type PaymentTrigger,
  TRANSITIONS,
  transition,
  UNSETTLED_STATUSES,
} from "./payment-state.ts";

/** Triggers a merchant fires on purpose that may reopen a final payment (D19). */
const MERCHANT_REOPENS: readonly PaymentTrigger[] = ["unmatched_attached"];

describe("payment transitions", () => {
  it.each<[PaymentStatus, PaymentTrigger, PaymentStatus, string | null]>([
    ["pending", "transfer_detected", "detected", "payment.detected"],
    ["detected", "confirmations_met", "confirmed", "payment.confirmed"],
    ["confirmed", "settlement_completed", "forwarded", "payment.forwarded"],
    ["confirmed", "settlement_failed", "failed", "payment.failed"],
    ["pending", "sandbox_completed", "forwarded", "payment.forwarded"],
    ["pending", "card_checkout_completed", "forwarded", "payment.forwarded"],
    ["pending", "card_async_payment_succeeded", "forwarded", "payment.forwarded"],
    ["pending", "card_async_payment_failed", "failed", "payment.failed"],
    ["pending", "card_checkout_expired", "expired", "payment.expired"],
    ["pending", "expiry_elapsed", "expired", "payment.expired"],
    ["pending", "cancel_requested", "cancelled", "payment.cancelled"],
    ["detected", "detection_reverted", "pending", null],
    ["pending", "x402_settlement_failed", "failed", "payment.failed"],
  ])("%s --%s--> %s emitting %s", (from, trigger, to, event) => {
    expect(transition(from, trigger)).toEqual({ ok: true, from, to, event });
  });

  it("refuses cancel of anything but pending (part 3: confirmed, forwarded → 400)", () => {
    for (const status of PAYMENT_STATUSES.filter((s) => s !== "pending")) {
      expect(transition(status, "cancel_requested").ok).toBe(false);
    }
  });

  it("never moves a final payment again, whatever the payer, the chain or the provider does", () => {
    for (const status of FINAL_STATUSES) {
      for (const trigger of Object.keys(TRANSITIONS) as PaymentTrigger[]) {
        if (MERCHANT_REOPENS.includes(trigger)) continue;
        expect(transition(status, trigger).ok, `${status} + ${trigger}`).toBe(false);
      }
    }
  });

  it("lets only the merchant attach a transfer to an expired payment (D19), and nothing else final", () => {
    expect(transition("expired", "unmatched_attached")).toMatchObject({ ok: true, to: "detected" });
    expect(transition("pending", "unmatched_attached")).toMatchObject({ ok: true, to: "detected" });
    for (const status of FINAL_STATUSES.filter((s) => s !== "expired")) {
      expect(transition(status, "unmatched_attached").ok, status).toBe(false);
    }
  });

  it("allows each trigger from exactly the statuses listed", () => {
    let allowed = 0;
    for (const status of PAYMENT_STATUSES) {
      for (const trigger of Object.keys(TRANSITIONS) as PaymentTrigger[]) {
        if (transition(status, trigger).ok) allowed++;
      }
    }
    expect(allowed).toBe(15);
  });

  it("verifies only forwarded", () => {
    expect(PAYMENT_STATUSES.filter(isVerified)).toEqual(["forwarded"]);
  });

  it("calls final exactly the statuses no trigger but the merchant's attach leaves", () => {
    const left = new Set(
      Object.entries(TRANSITIONS)
        .filter(([trigger]) => !MERCHANT_REOPENS.includes(trigger as PaymentTrigger))
        .flatMap(([, rule]) => rule.from),
    );
    expect(PAYMENT_STATUSES.filter(isFinal)).toEqual(PAYMENT_STATUSES.filter((s) => !left.has(s)));
  });

  it("counts as unsettled the statuses between a detected transfer and its settlement", () => {
    expect(UNSETTLED_STATUSES).toEqual([TRANSITIONS.transfer_detected.to, TRANSITIONS.confirmations_met.to]);
    expect(UNSETTLED_STATUSES).toContain(TRANSITIONS.settlement_completed.from[0]);
  });
});
