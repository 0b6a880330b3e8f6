// The typed client of the payments, payouts and wallets service (sdk/README.md).
export type { Answer, Body, CreateOptions, Query } from "./api.ts";
export { PaymentsClient, type PaymentsClientOptions } from "./client.ts";
export {
  AuthenticationError,
  BadRequestError,
  ConflictError,
  type ErrorBody,
  NotFoundError,
  PaymentsApiError,
  PaymentsConnectionError,
  PaymentsError,
  PaymentsTimeoutError,
  PermissionError,
  RateLimitError,
  ServerError,
} from "./errors.ts";
export type { components, operations, paths } from "./schema.ts";
export type { CallOptions } from "./transport.ts";
export {
  type PayoutEventData,
  type VerifyOptions,
  verifyWebhook,
  type WebhookEvent,
  type WebhookHeaders,
  WebhookVerificationError,
  type WebhookVerificationReason,
} from "./webhooks.ts";
