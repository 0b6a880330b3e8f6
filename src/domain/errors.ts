// The errors the service answers on purpose, as the domain sees them: a stable `code` that callers
// and the HTTP edge can rely on (messages are for people and may be reworded), a message, the
// context fields the answer shows (`details`), and the error that led to it (`cause`). Nothing
// here knows about HTTP: platform/http/error-handler.ts alone turns a code into a status and
// the spec's body `{error: message, ...details}`. Anything thrown that is not an AppError is a
// bug, answered as a logged 500.

export type ErrorCode =
  | "INVALID_REQUEST"
  | "INSUFFICIENT_BALANCE"
  | "INSUFFICIENT_GAS"
  | "UNAUTHORIZED"
  | "FORBIDDEN"
  | "NOT_FOUND"
  | "CONFLICT"
  | "TRANSITION_REFUSED"
  | "CONCURRENT_CHANGE"
  | "RATE_LIMITED"
  | "INTERNAL"
  | "PAYOUT_FAILED"
  | "PROVIDER_ERROR"
  | "UNAVAILABLE"
  | "CIRCUIT_BREAKER_OPEN"
  | "REFUND_EXCEEDED"
  | "POLICY_REFUSED";

export type ErrorDetails = Readonly<Record<string, unknown>>;

export abstract class AppError extends Error {
  abstract readonly code: ErrorCode;
  /** The context the answer shows beside the message, in this order. */
  readonly details: ErrorDetails;

  constructor(message: string, details: ErrorDetails = {}, options?: ErrorOptions) {
    super(message, options);
    this.name = new.target.name;
    this.details = details;
  }
}

/** The request is malformed or asks for something its own fields rule out. */
export class InvalidRequest extends AppError {
  readonly code = "INVALID_REQUEST";
}

export class Unauthorized extends AppError {
  readonly code = "UNAUTHORIZED";
}

export class Forbidden extends AppError {
  readonly code = "FORBIDDEN";
}

export class NotFound extends AppError {
  readonly code = "NOT_FOUND";
}

/** The request contradicts what is stored (a used name, an idempotency key, a state). */
export class Conflict extends AppError {
  readonly code = "CONFLICT";
}

/** A payment's transition table refuses the trigger in the payment's present status. */
export class TransitionRefused extends AppError {
  readonly code = "TRANSITION_REFUSED";

  constructor(status: string, trigger: string) {
    super(`Payment is ${status}; ${trigger} does not apply`);
  }
}

/** A compare-and-set lost to a concurrent change: the caller may simply retry. */
export class ConcurrentChange extends AppError {
  readonly code = "CONCURRENT_CHANGE";
}

/** Too many requests; the client may try again after `retryAfterSeconds` (not part of the body). */
export class RateLimited extends AppError {
  readonly code = "RATE_LIMITED";
  readonly retryAfterSeconds: number;

  constructor(message: string, retryAfterSeconds: number) {
    super(message);
    this.retryAfterSeconds = retryAfterSeconds;
  }
}

/** A dependency this service needs is not configured or not reachable. */
export class Unavailable extends AppError {
  readonly code = "UNAVAILABLE";
}

/** A configured network whose node does not answer (D22): 503 naming it; its work waits. */
export class NetworkUnavailable extends Unavailable {
  constructor(network: string) {
    super("Network unavailable", { network });
  }
}

/** An outside provider (the card processor) refused or could not be reached. */
export class ProviderError extends AppError {
  readonly code = "PROVIDER_ERROR";
}

/** A failure the service answers on purpose but cannot explain further (e.g. a vanished row). */
export class InternalError extends AppError {
  readonly code = "INTERNAL";
}

// Payouts. The spec names the code of the last three in their bodies; the error handler puts it
// right after `error`, as the bodies have always had it.

/** A payout larger than what the wallet can spend: details `{available, requested, tokenSymbol}`. */
export class InsufficientBalance extends AppError {
  readonly code = "INSUFFICIENT_BALANCE";

  /** `network`: the network whose balance is short (D22). */
  constructor(details: { available: string; requested: string; tokenSymbol: string; network: string }) {
    super("Insufficient balance", details);
  }
}

/** An EOA payout whose wallet cannot pay the gas: details `{ethBalance, required, action}`. */
export class InsufficientGas extends AppError {
  readonly code = "INSUFFICIENT_GAS";
  /** How much more ETH (wei) the wallet needs for it: what a gas top-up adds (not in the answer). */
  readonly shortWei: bigint;

  constructor(details: { ethBalance: string; required: string; action: string }, shortWei = 0n) {
    super("Insufficient ETH for gas", details);
    this.shortWei = shortWei;
  }
}

/** A payout whose transfer failed: details `{detail, failStreak, remainingBeforePause, circuitBreaker}`. */
export class PayoutFailed extends AppError {
  readonly code = "PAYOUT_FAILED";

  constructor(
    details: { detail: string; failStreak: number; remainingBeforePause: number; circuitBreaker: false },
    options?: ErrorOptions,
  ) {
    super("Payout failed", details, options);
  }
}

/**
 * Payouts paused for the workspace by the circuit breaker. Two spec texts: the failure that trips
 * it ("Payouts paused by the circuit breaker", with that failure's detail) and a payout refused
 * while it is open ("Payouts are paused for this workspace by the circuit breaker").
 */
export class CircuitBreakerOpen extends AppError {
  readonly code = "CIRCUIT_BREAKER_OPEN";
}

/** A refund larger than what its payment has left to refund (D19): details `{refundable}`. */
export class RefundExceeded extends AppError {
  readonly code = "REFUND_EXCEEDED";
}

/**
 * An agent wallet's spending policy refuses a payment (D23): details `{policy}`, the rule that
 * refused it (spending-policy.ts POLICY_RULES).
 */
export class PolicyRefused extends AppError {
  readonly code = "POLICY_REFUSED";

  constructor(message: string, policy: string) {
    super(message, { policy });
  }
}

export const badRequest = (message: string, details?: ErrorDetails): InvalidRequest =>
  new InvalidRequest(message, details);
export const notFound = (message: string): NotFound => new NotFound(message);
export const unauthorized = (message: string): Unauthorized => new Unauthorized(message);
export const forbidden = (message: string): Forbidden => new Forbidden(message);
export const conflict = (message: string, details?: ErrorDetails): Conflict => new Conflict(message, details);
export const serviceUnavailable = (message: string, details?: ErrorDetails): Unavailable =>
  new Unavailable(message, details);

/**
 * The first line of an error's text: node, bundler and driver messages go on with request dumps
 * and stacks that must not reach an answer, a stored payout error or a readiness report.
 */
export function firstLine(text: string): string {
  return text.split("\n")[0] ?? "";
}

/** The first line of a thrown value's message. */
export function firstLineOf(err: unknown): string {
  return firstLine(err instanceof Error ? err.message : String(err));
}
