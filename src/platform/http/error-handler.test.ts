import Fastify, { type FastifyInstance } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type AppError,
  CircuitBreakerOpen,
  ConcurrentChange,
  InsufficientBalance,
  InsufficientGas,
  InternalError,
  notFound,
  PayoutFailed,
  ProviderError,
  RateLimited,
  TransitionRefused,
} from "../../domain/errors.ts";
import { registerErrorHandling } from "./error-handler.ts";

// Each error class against the exact answer the old `ApiError(status, message, context, headers)`
// gave for it: status, headers and body text byte for byte (field order included), so that the
// payouts wing can move onto these classes without a client seeing a difference.

const RESUME = "POST /api/v1/workspaces/{id}/resume, or wait 30 minutes after pausedAt";
const PAUSED_AT = "2026-01-02T03:04:05.000Z";

const cases: { name: string; error: () => AppError; status: number; body: string; headers?: object }[] = [
  {
    name: "PayoutFailed",
    error: () =>
      new PayoutFailed({
        detail: "execution reverted",
        failStreak: 2,
        remainingBeforePause: 3,
        circuitBreaker: false,
      }),
    status: 500,
    body: '{"error":"Payout failed","code":"PAYOUT_FAILED","detail":"execution reverted","failStreak":2,"remainingBeforePause":3,"circuitBreaker":false}',
  },
  {
    name: "CircuitBreakerOpen, tripped by this failure",
    error: () =>
      new CircuitBreakerOpen("Payouts paused by the circuit breaker", {
        circuitBreaker: true,
        detail: "execution reverted",
        failStreak: 5,
        remainingBeforePause: 0,
        pausedAt: PAUSED_AT,
        resumeAction: RESUME,
      }),
    status: 503,
    body: `{"error":"Payouts paused by the circuit breaker","code":"CIRCUIT_BREAKER_OPEN","circuitBreaker":true,"detail":"execution reverted","failStreak":5,"remainingBeforePause":0,"pausedAt":"${PAUSED_AT}","resumeAction":"${RESUME}"}`,
  },
  {
    name: "CircuitBreakerOpen, already paused",
    error: () =>
      new CircuitBreakerOpen("Payouts are paused for this workspace by the circuit breaker", {
        circuitBreaker: true,
        failStreak: 5,
        pausedAt: PAUSED_AT,
        resumeAction: RESUME,
      }),
    status: 503,
    body: `{"error":"Payouts are paused for this workspace by the circuit breaker","code":"CIRCUIT_BREAKER_OPEN","circuitBreaker":true,"failStreak":5,"pausedAt":"${PAUSED_AT}","resumeAction":"${RESUME}"}`,
  },
  {
    name: "InsufficientGas",
    error: () =>
      new InsufficientGas({ ethBalance: "0.0", required: "0.001", action: "Send at least 0.001 ETH" }),
    status: 400,
    body: '{"error":"Insufficient ETH for gas","code":"INSUFFICIENT_GAS","ethBalance":"0.0","required":"0.001","action":"Send at least 0.001 ETH"}',
  },
  {
    name: "InsufficientBalance",
    error: () =>
      new InsufficientBalance({
        available: "4.00",
        requested: "12.00",
        tokenSymbol: "USDC",
        network: "base",
      }),
    status: 400,
    body: '{"error":"Insufficient balance","available":"4.00","requested":"12.00","tokenSymbol":"USDC","network":"base"}',
  },
  {
    name: "InternalError (a payout with no stored outcome)",
    error: () => new InternalError("Payout failed"),
    status: 500,
    body: '{"error":"Payout failed"}',
  },
  {
    name: "TransitionRefused",
    error: () => new TransitionRefused("forwarded", "cancel"),
    status: 409,
    body: '{"error":"Payment is forwarded; cancel does not apply"}',
  },
  {
    name: "ConcurrentChange",
    error: () => new ConcurrentChange("Payment changed concurrently; retry"),
    status: 409,
    body: '{"error":"Payment changed concurrently; retry"}',
  },
  {
    name: "ProviderError",
    error: () =>
      new ProviderError("Card provider error", { detail: "timeout" }, { cause: new Error("timeout") }),
    status: 502,
    body: '{"error":"Card provider error","detail":"timeout"}',
  },
  {
    name: "notFound()",
    error: () => notFound("Payment not found"),
    status: 404,
    body: '{"error":"Payment not found"}',
  },
  {
    name: "RateLimited",
    error: () => new RateLimited("Rate limit exceeded", 42),
    status: 429,
    body: '{"error":"Rate limit exceeded"}',
    headers: { "retry-after": "42" },
  },
];

let app: FastifyInstance;

beforeAll(async () => {
  app = Fastify();
  registerErrorHandling(app);
  cases.forEach((c, i) => {
    app.get(`/case/${i}`, async () => {
      throw c.error();
    });
  });
  await app.ready();
});

afterAll(async () => {
  await app.close();
});

describe("error answers", () => {
  cases.forEach((c, i) => {
    it(`${c.name} → ${c.status} ${c.body}`, async () => {
      const res = await app.inject({ method: "GET", url: `/case/${i}` });
      expect(res.statusCode).toBe(c.status);
      expect(res.headers["content-type"]).toBe("application/json; charset=utf-8");
      expect(res.payload).toBe(c.body);
      if (c.headers) expect(res.headers).toMatchObject(c.headers);
      else expect(res.headers["retry-after"]).toBeUndefined();
    });
  });

  it("keeps the cause it was given, for the logs", () => {
    const cause = new Error("socket hang up");
    expect(new ProviderError("Card provider error", { detail: "x" }, { cause }).cause).toBe(cause);
  });
});
