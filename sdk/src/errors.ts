// What a call that did not succeed throws: an answer of the service (PaymentsApiError and its
// kinds by status, carrying the body's message, code and context fields), or no answer at all
// (PaymentsConnectionError, PaymentsTimeoutError). The caller's own abort is rethrown as it is.

/** The body of every error answer: `{error, code?, ...context}` (docs/api.md). */
export interface ErrorBody {
  error: string;
  code?: string;
  [field: string]: unknown;
}

export class PaymentsError extends Error {
  override name = "PaymentsError";
}

/** The service answered with an error status. */
export class PaymentsApiError extends PaymentsError {
  override name = "PaymentsApiError";
  /** The HTTP status. */
  readonly status: number;
  /** The stable code of the error, where the service names one (payout errors, e.g. `CIRCUIT_BREAKER_OPEN`). */
  readonly code: string | undefined;
  /** The body's other fields: `failStreak`, `circuitBreaker`, `available`, `payout`, `refund`… */
  readonly context: Readonly<Record<string, unknown>>;
  /** The whole body as answered. */
  readonly body: ErrorBody;

  constructor(status: number, body: ErrorBody) {
    super(body.error);
    this.status = status;
    this.body = body;
    const { error: _message, code, ...context } = body;
    this.code = typeof code === "string" ? code : undefined;
    this.context = context;
  }
}

/** 400: the request names something the service refuses (the message names the field). */
export class BadRequestError extends PaymentsApiError {
  override name = "BadRequestError";
}
/** 401: no key, an unknown key or a revoked one. */
export class AuthenticationError extends PaymentsApiError {
  override name = "AuthenticationError";
}
/** 403: the key may not do this (e.g. a spending policy refuses the payment). */
export class PermissionError extends PaymentsApiError {
  override name = "PermissionError";
}
/** 404: nothing of that id in the key's workspace and environment. */
export class NotFoundError extends PaymentsApiError {
  override name = "NotFoundError";
}
/** 409: the state does not allow it, or an idempotency key was used with another request. */
export class ConflictError extends PaymentsApiError {
  override name = "ConflictError";
}
/** 429: over the key's rate limit, after the client's own retries. */
export class RateLimitError extends PaymentsApiError {
  override name = "RateLimitError";
}
/** 5xx: the service or a provider behind it failed, after the client's own retries where allowed. */
export class ServerError extends PaymentsApiError {
  override name = "ServerError";
}

/** No answer: the connection failed or was cut (after the client's own retries where allowed). */
export class PaymentsConnectionError extends PaymentsError {
  override name = "PaymentsConnectionError";
}

/** No answer within the call's timeout (all of its attempts together). */
export class PaymentsTimeoutError extends PaymentsError {
  override name = "PaymentsTimeoutError";
}

/** The error class of each status the service answers with; any other 4xx is a PaymentsApiError. */
const BY_STATUS: Readonly<Record<number, typeof PaymentsApiError>> = {
  400: BadRequestError,
  401: AuthenticationError,
  403: PermissionError,
  404: NotFoundError,
  409: ConflictError,
  429: RateLimitError,
};

/** The error of an answer with status `status` and body `body`. */
export function apiError(status: number, body: unknown): PaymentsApiError {
  const parsed: ErrorBody =
    typeof body === "object" && body !== null && typeof (body as ErrorBody).error === "string"
      ? (body as ErrorBody)
      : { error: `HTTP ${status}` };
  const kind = status >= 500 ? ServerError : (BY_STATUS[status] ?? PaymentsApiError);
  return new kind(status, parsed);
}
