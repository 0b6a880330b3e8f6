// One error type for everything the API answers on purpose. The error handler (error-handler.ts)
// maps it to the spec's JSON body `{error, ...context}`; anything else becomes a logged 500.

export class ApiError extends Error {
  readonly status: number;
  readonly context: Record<string, unknown>;
  readonly headers: Record<string, string>;

  constructor(
    status: number,
    message: string,
    context: Record<string, unknown> = {},
    headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = "ApiError";
    this.status = status;
    this.context = context;
    this.headers = headers;
  }

  toBody(): Record<string, unknown> {
    return { error: this.message, ...this.context };
  }
}

export const badRequest = (message: string, context?: Record<string, unknown>) =>
  new ApiError(400, message, context);
export const notFound = (message: string) => new ApiError(404, message);
export const unauthorized = (message: string) => new ApiError(401, message);
export const forbidden = (message: string) => new ApiError(403, message);
export const conflict = (message: string, context?: Record<string, unknown>) =>
  new ApiError(409, message, context);
export const serviceUnavailable = (message: string, context?: Record<string, unknown>) =>
  new ApiError(503, message, context);
