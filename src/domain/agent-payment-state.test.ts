import { describe, expect, it } from "vitest";
import {
  AGENT_PAYMENT_STATUSES,
  AGENT_PAYMENT_TRANSITIONS,
  isAgentPaymentStatus,
  isFinal,
  RESERVING_STATUSES,
  reserves,
} from "./agent-payment-state.ts";
import { EVENT_TYPES } from "./events.ts";

describe("the agent payment transition table", () => {
  it("records an authorization signed at once, or waiting for a person", () => {
    expect(AGENT_PAYMENT_TRANSITIONS.issued).toEqual({
      from: null,
      to: "authorized",
      event: "agent.payment.authorized",
    });
    expect(AGENT_PAYMENT_TRANSITIONS.held_for_approval).toEqual({
      from: null,
      to: "approval_required",
      event: "agent.payment.approval_required",
    });
  });

  it("lets a person decide only a waiting authorization: approved is signed, denied is released", () => {
    expect(AGENT_PAYMENT_TRANSITIONS.approved).toMatchObject({ from: "approval_required", to: "authorized" });
    expect(AGENT_PAYMENT_TRANSITIONS.approved.event).toBe("agent.payment.authorized");
    expect(AGENT_PAYMENT_TRANSITIONS.denied).toEqual({
      from: "approval_required",
      to: "denied",
      event: null,
    });
  });

  it("ends a signed authorization settled or expired, with their events", () => {
    expect(AGENT_PAYMENT_TRANSITIONS.settled).toEqual({
      from: "authorized",
      to: "settled",
      event: "agent.payment.settled",
    });
    expect(AGENT_PAYMENT_TRANSITIONS.expired).toEqual({
      from: "authorized",
      to: "expired",
      event: "agent.payment.expired",
    });
  });

  it("names only statuses and events that exist", () => {
    for (const rule of Object.values(AGENT_PAYMENT_TRANSITIONS)) {
      if (rule.from !== null) expect(AGENT_PAYMENT_STATUSES).toContain(rule.from);
      expect(AGENT_PAYMENT_STATUSES).toContain(rule.to);
      if (rule.event !== null) expect(EVENT_TYPES).toContain(rule.event);
    }
  });

  it("counts reserved and spent amounts against the caps, not denied or expired ones", () => {
    expect([...RESERVING_STATUSES].sort()).toEqual(["approval_required", "authorized", "settled"]);
    expect(reserves("denied")).toBe(false);
    expect(reserves("expired")).toBe(false);
    expect(reserves("approval_required")).toBe(true);
  });

  it("ends denied, settled and expired authorizations for good", () => {
    expect(AGENT_PAYMENT_STATUSES.filter(isFinal)).toEqual(["denied", "settled", "expired"]);
  });

  it("recognises its statuses and nothing else", () => {
    expect(isAgentPaymentStatus("authorized")).toBe(true);
    expect(isAgentPaymentStatus("pending")).toBe(false);
    expect(isAgentPaymentStatus(undefined)).toBe(false);
  });
});
