import { PaymentsConnectionError, PaymentsTimeoutError } from "./errors.ts";

// How a request reaches the service: the key, a timeout for the whole call, the caller's
// AbortSignal, and retries with jittered exponential backoff where a retry cannot do a thing twice:
// - 429: always (the service refused it before doing anything), after its Retry-After;
// - no answer (connection refused, reset) and 5xx: only for a request that is idempotent by its
//   method (GET, HEAD, PUT, DELETE) or carries an idempotency key (the service answers a repeat
//   with the first result), so a create is never made twice.

export interface RetryPolicy {
  /** Attempts after the first (default 2). */
  maxRetries: number;
  /** The first backoff, doubled each attempt, with full jitter (default 250 ms). */
  baseDelayMs: number;
  /** The longest wait between attempts, a Retry-After included (default 8 s). */
  maxDelayMs: number;
}

export interface TransportOptions {
  apiKey: string;
  /** The whole call, every attempt included (default 30 s). */
  timeoutMs: number;
  retry: RetryPolicy;
  fetch: typeof fetch;
}

/** Per call: a timeout of its own, the caller's signal. */
export interface CallOptions {
  timeoutMs?: number;
  signal?: AbortSignal;
}

const IDEMPOTENT_METHODS = new Set(["GET", "HEAD", "PUT", "DELETE", "OPTIONS"]);

/** Whether a request may be sent again after no answer or a 5xx. */
export function isRetrySafe(request: Request, bodyHasKey: boolean): boolean {
  return IDEMPOTENT_METHODS.has(request.method) || request.headers.has("idempotency-key") || bodyHasKey;
}

/** The wait before attempt `attempt` (1-based): Retry-After when given, else jittered backoff. */
export function backoffMs(
  attempt: number,
  policy: RetryPolicy,
  retryAfter: string | null,
  random = Math.random,
) {
  const after = retryAfterMs(retryAfter);
  if (after !== null) return Math.min(after, policy.maxDelayMs);
  const ceiling = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** (attempt - 1));
  return Math.round(random() * ceiling);
}

/** Retry-After as seconds or an HTTP date, in ms; null when absent or unreadable. */
export function retryAfterMs(value: string | null): number | null {
  if (value === null || value.trim() === "") return null;
  if (/^\d+(\.\d+)?$/.test(value.trim())) return Math.ceil(Number(value) * 1000);
  const at = Date.parse(value);
  return Number.isNaN(at) ? null : Math.max(0, at - Date.now());
}

/**
 * A fetch for openapi-fetch that authenticates, retries and times out as above. `bodyHasKey`
 * tells it that a request's body carries its idempotency key (payouts' `idempotencyKey`).
 */
export function transportFetch(
  options: TransportOptions,
  call: CallOptions & { bodyHasKey?: boolean },
): (request: Request) => Promise<Response> {
  return async (input) => {
    const { timeoutMs = options.timeoutMs, signal, bodyHasKey = false } = call;
    const timeout = AbortSignal.timeout(timeoutMs);
    const combined = signal ? AbortSignal.any([signal, timeout]) : timeout;
    const template = new Request(input, { signal: combined });
    template.headers.set("authorization", `Bearer ${options.apiKey}`);
    const safe = isRetrySafe(template, bodyHasKey);
    for (let attempt = 0; ; attempt++) {
      let response: Response | undefined;
      let failure: unknown;
      try {
        response = await options.fetch(template.clone());
      } catch (err) {
        if (signal?.aborted) throw signal.reason;
        if (timeout.aborted)
          throw new PaymentsTimeoutError(`No answer within ${timeoutMs} ms`, { cause: err });
        failure = err;
      }
      const retryable = response ? response.status === 429 || (response.status >= 500 && safe) : safe;
      if (!retryable || attempt >= options.retry.maxRetries) {
        if (response) return response;
        throw new PaymentsConnectionError(`No answer from ${template.url}: ${messageOf(failure)}`, {
          cause: failure,
        });
      }
      const wait = backoffMs(attempt + 1, options.retry, response?.headers.get("retry-after") ?? null);
      await response?.body?.cancel();
      await sleep(wait, combined).catch(() => {
        if (signal?.aborted) throw signal.reason;
        throw new PaymentsTimeoutError(`No answer within ${timeoutMs} ms`);
      });
    }
  };
}

function messageOf(err: unknown): string {
  if (err instanceof Error)
    return err.cause instanceof Error ? `${err.message} (${err.cause.message})` : err.message;
  return String(err);
}

/** Waits `ms`, or rejects when `signal` aborts first. */
function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    signal.addEventListener("abort", onAbort, { once: true });
  });
}
