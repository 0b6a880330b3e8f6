// The errors now live in domain/errors.ts, with no HTTP in them. This file only keeps imports
// from here working, and the ApiError shim below, while the payouts wing is rewritten.

import { AppError, type ErrorCode, type ErrorDetails } from "../../domain/errors.ts";

export {
  AppError,
  badRequest,
  conflict,
  forbidden,
  notFound,
  serviceUnavailable,
  unauthorized,
} from "../../domain/errors.ts";

/**
 * TEMPORARY: the old `new ApiError(status, message, context)` form, for the sites left in
 * src/modules/payouts/ (being rewritten onto PayoutFailed, CircuitBreakerOpen, InternalError).
 * Delete it once nothing there uses it. Only the statuses those sites throw are accepted, each
 * mapped to the code the error handler answers with that status; the body stays
 * `{error: message, ...context}` because none of these codes adds a field of its own.
 */
const CODE_OF_STATUS = {
  500: "INTERNAL",
  503: "UNAVAILABLE",
} as const satisfies Record<number, ErrorCode>;

export class ApiError extends AppError {
  readonly code: (typeof CODE_OF_STATUS)[keyof typeof CODE_OF_STATUS];

  constructor(status: keyof typeof CODE_OF_STATUS, message: string, context: ErrorDetails = {}) {
    super(message, context);
    this.code = CODE_OF_STATUS[status];
  }
}
