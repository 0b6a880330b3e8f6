import type { Client } from "openapi-fetch";
import { apiError } from "./errors.ts";
import type { paths } from "./schema.ts";
import { type CallOptions, type TransportOptions, transportFetch } from "./transport.ts";

// What every resource shares: the typed openapi-fetch client over the generated `paths`, the
// transport of one call (key, timeout, signal, retries), and the unwrapping of an answer into its
// data or a typed error. The request and answer types are the generated ones (schema.ts), so a
// change of the API that the SDK does not follow does not compile.

/** Options of a call that creates something: its idempotency key (generated when absent). */
export interface CreateOptions extends CallOptions {
  /** Reused by the client's own retries of this call; pass your own to make your retries safe too. */
  idempotencyKey?: string;
}

type Method = "get" | "post" | "put" | "patch" | "delete";
type Operation<P extends keyof paths, M extends Method> = paths[P][M];

/** The JSON body an operation takes. */
export type Body<P extends keyof paths, M extends Method> =
  Operation<P, M> extends { requestBody?: { content: { "application/json": infer B } } } ? B : never;

/** The query an operation takes. */
export type Query<P extends keyof paths, M extends Method> =
  Operation<P, M> extends { parameters: { query?: infer Q } } ? NonNullable<Q> : never;

/** The JSON of an operation's 200 or 201 answer. */
export type Answer<P extends keyof paths, M extends Method> =
  Operation<P, M> extends { responses: { 200: { content: { "application/json": infer A } } } }
    ? A
    : Operation<P, M> extends { responses: { 201: { content: { "application/json": infer A } } } }
      ? A
      : never;

export class Api {
  readonly http: Client<paths>;
  readonly #transport: TransportOptions;

  constructor(http: Client<paths>, transport: TransportOptions) {
    this.http = http;
    this.#transport = transport;
  }

  /** The fetch of one call. */
  fetch(call: CallOptions & { bodyHasKey?: boolean } = {}): (request: Request) => Promise<Response> {
    return transportFetch(this.#transport, call);
  }
}

/** The data of a successful answer, else its typed error. */
export async function unwrap<D>(
  pending: Promise<{ data?: D; error?: unknown; response: Response }>,
): Promise<D> {
  const { data, error, response } = await pending;
  if (!response.ok) throw apiError(response.status, error);
  return data as D;
}

/** The idempotency key of a create: the caller's, else a fresh one for this call and its retries. */
export function keyOf(options: CreateOptions | undefined): string {
  return options?.idempotencyKey ?? crypto.randomUUID();
}
