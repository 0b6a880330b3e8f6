import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { ApiError } from "./errors.ts";

// Fastify's own error codes we answer with a specific client error (D10). Everything else
// that is not an ApiError is unexpected: logged with its stack, answered as a bare 500.
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
  app.setErrorHandler((err: FastifyError | ApiError, request, reply) => {
    if (err instanceof ApiError) {
      for (const [name, value] of Object.entries(err.headers)) reply.header(name, value);
      return reply.status(err.status).type("application/json").send(err.toBody());
    }
    const fastifyErr = err as FastifyError;
    if (fastifyErr.validation) {
      return reply
        .status(400)
        .type("application/json")
        .send({ error: validationMessage(fastifyErr) });
    }
    const known = fastifyErr.code ? FRAMEWORK_ERRORS[fastifyErr.code] : undefined;
    if (fastifyErr.code === "FST_ERR_CTP_BODY_TOO_LARGE") {
      // Fastify closes the connection with the rest of the body unread, which makes the kernel
      // send a reset: a client still writing loses the 413. Keeping the connection lets Node read
      // and discard the rest (bounded by requestTimeout), so the answer is always read.
      reply.removeHeader("connection");
    }
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
function validationMessage(err: FastifyError): string {
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
