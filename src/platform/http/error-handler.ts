import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { AppError, type ErrorCode, RateLimited } from "../../domain/errors.ts";

/**
 * The one place an error code becomes an HTTP answer: its status, and whether the spec's body
 * names the code (`{error, code, ...details}`, for the payout errors clients branch on) or shows
 * only the message and details (`{error, ...details}`). Every code is listed, so a new one does
 * not compile until it is given a status.
 */
const ANSWERS: Record<ErrorCode, { status: number; codeInBody?: true }> = {
  INVALID_REQUEST: { status: 400 },
  INSUFFICIENT_BALANCE: { status: 400 },
  INSUFFICIENT_GAS: { status: 400, codeInBody: true },
  UNAUTHORIZED: { status: 401 },
  FORBIDDEN: { status: 403 },
  NOT_FOUND: { status: 404 },
  CONFLICT: { status: 409 },
  TRANSITION_REFUSED: { status: 409 },
  CONCURRENT_CHANGE: { status: 409 },
  RATE_LIMITED: { status: 429 },
  INTERNAL: { status: 500 },
  PAYOUT_FAILED: { status: 500, codeInBody: true },
  PROVIDER_ERROR: { status: 502 },
  UNAVAILABLE: { status: 503 },
  CIRCUIT_BREAKER_OPEN: { status: 503, codeInBody: true },
  REFUND_EXCEEDED: { status: 400 },
  POLICY_REFUSED: { status: 403 },
};

/** The HTTP status an error code is answered with. */
export function statusOf(code: ErrorCode): number {
  return ANSWERS[code].status;
}

/** The spec's body for an error; its fields keep the order they have always had. */
function errorBody(err: AppError): Record<string, unknown> {
  return ANSWERS[err.code].codeInBody
    ? { error: err.message, code: err.code, ...err.details }
    : { error: err.message, ...err.details };
}

// Fastify's own error codes we answer with a specific client error (D10). Everything else
// that is not an AppError is unexpected: logged with its stack, answered as a bare 500.
const FRAMEWORK_ERRORS: Record<string, { status: number; message: (err: FastifyError) => string }> = {
  FST_ERR_CTP_INVALID_JSON_BODY: { status: 400, message: () => "Invalid JSON body" },
  FST_ERR_CTP_EMPTY_JSON_BODY: { status: 400, message: () => "Invalid JSON body" },
  FST_ERR_CTP_BODY_TOO_LARGE: { status: 413, message: () => "Request body is too large (limit 1 MiB)" },
  FST_ERR_CTP_INVALID_MEDIA_TYPE: {
    status: 415,
    message: () => "Unsupported Content-Type: send application/json",
  },
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: { status: 400, message: () => "Invalid Content-Length header" },
  FST_ERR_CTP_INVALID_TYPE: { status: 415, message: () => "Unsupported Content-Type: send application/json" },
};

/** The agents and wallets families answer errors as {success: false, error} (D8). */
const WRAPPED = /^\/api\/(agents|wallets)(\/|\?|$)/;

/**
 * Errors Fastify raises before routing, where no hook runs: a malformed %-escape in the path, a
 * path segment over the router's 100 characters. Shaped here, agents and wallets included.
 */
export function answerFrameworkError(
  error: FastifyError,
  request: FastifyRequest,
  reply: FastifyReply,
): void {
  const message =
    error.code === "FST_ERR_MAX_PARAM_LENGTH"
      ? "Path segment is too long (at most 100 characters)"
      : "Malformed URL";
  const body = WRAPPED.test(request.url) ? { success: false, error: message } : { error: message };
  void reply.code(400).type("application/json").send(body);
}

export function registerErrorHandling(app: FastifyInstance): void {
  app.addHook("onSend", async (request, reply, payload) => {
    if (reply.statusCode < 400 || !WRAPPED.test(request.url) || typeof payload !== "string") return payload;
    try {
      const body = JSON.parse(payload) as Record<string, unknown>;
      if (body.success === false) return payload;
      return JSON.stringify({ success: false, ...body });
    } catch {
      return payload;
    }
  });
  app.setErrorHandler((err: FastifyError | AppError, request, reply) => {
    if (err instanceof AppError) {
      if (err instanceof RateLimited) reply.header("retry-after", String(err.retryAfterSeconds));
      const status = statusOf(err.code);
      // A failure of ours or of what we depend on, with what caused it: logged, not only answered.
      if (status >= 500 && err.cause !== undefined) request.log.warn({ err }, err.message);
      return reply.status(status).type("application/json").send(errorBody(err));
    }
    const fastifyErr = err as FastifyError;
    if (fastifyErr.validation) {
      return reply
        .status(400)
        .type("application/json")
        .send({ error: validationMessage(fastifyErr) });
    }
    const known = fastifyErr.code ? FRAMEWORK_ERRORS[fastifyErr.code] : undefined;
    if (known) {
      return reply
        .status(known.status)
        .type("application/json")
        .send({ error: known.message(fastifyErr) });
    }
    if (fastifyErr instanceof SyntaxError && fastifyErr.statusCode === 400) {
      return reply.status(400).type("application/json").send({ error: "Invalid JSON body" });
    }
    if (
      typeof fastifyErr.statusCode === "number" &&
      fastifyErr.statusCode >= 400 &&
      fastifyErr.statusCode < 500
    ) {
      // Other client errors raised by Fastify itself (e.g. malformed URL): the message is ours to show.
      return reply.status(fastifyErr.statusCode).type("application/json").send({ error: fastifyErr.message });
    }
    request.log.error({ err }, "unhandled error");
    return reply.status(500).type("application/json").send({ error: "Internal server error" });
  });

  app.setNotFoundHandler((request, reply) => {
    reply
      .status(404)
      .type("application/json")
      .send({ error: `Route not found: ${request.method} ${request.url.split("?")[0]}` });
  });
}

/** Turns an Ajv error into one sentence naming the field, e.g. "limit must be <= 100". */
export function validationMessage(err: FastifyError): string {
  const first = err.validation?.[0];
  if (!first) return "Invalid request";
  const part = err.validationContext ?? "request";
  const params = first.params as Record<string, unknown>;
  if (first.keyword === "required" && typeof params.missingProperty === "string") {
    return `${params.missingProperty} is required`;
  }
  if (first.keyword === "additionalProperties" && typeof params.additionalProperty === "string") {
    return `Unknown field in ${part}: ${params.additionalProperty}`;
  }
  const field = first.instancePath.replace(/^\//, "").replaceAll("/", ".") || part;
  return `${field} ${first.message ?? "is invalid"}`;
}
