import { type Answer, type Api, type Body, type CreateOptions, keyOf, type Query, unwrap } from "../api.ts";
import { offsetItems } from "../paging.ts";
import type { CallOptions } from "../transport.ts";

// Payments, their refunds, and the unmatched-transfer inbox (docs/api.md parts 2, 5 and 8).

type Payment = Answer<"/api/v1/payments/{id}", "get">["payment"];
type ListQuery = Omit<Query<"/api/v1/payments", "get">, "limit" | "offset">;

export class Payments {
  readonly #api: Api;
  constructor(api: Api) {
    this.#api = api;
  }

  /** Creates a payment; safe to retry (Idempotency-Key). */
  create(body: Body<"/api/v1/payments", "post">, options?: CreateOptions) {
    const key = keyOf(options);
    return unwrap(
      this.#api.http.POST("/api/v1/payments", {
        body,
        headers: { "Idempotency-Key": key },
        fetch: this.#api.fetch(options),
      }),
    );
  }

  get(id: string, options?: CallOptions) {
    return unwrap(
      this.#api.http.GET("/api/v1/payments/{id}", {
        params: { path: { id } },
        fetch: this.#api.fetch(options),
      }),
    );
  }

  /** One page of payments, newest first. */
  list(query: Query<"/api/v1/payments", "get"> = {}, options?: CallOptions) {
    return unwrap(
      this.#api.http.GET("/api/v1/payments", { params: { query }, fetch: this.#api.fetch(options) }),
    );
  }

  /** Every payment matching `query`, newest first, fetched a page at a time. */
  iterate(query: ListQuery = {}, options?: CallOptions): AsyncGenerator<Payment> {
    return offsetItems(async (window) => {
      const page = await this.list({ ...query, ...window }, options);
      return { items: page.payments, total: page.total };
    });
  }

  cancel(id: string, options?: CallOptions) {
    return unwrap(
      this.#api.http.POST("/api/v1/payments/{id}/cancel", {
        params: { path: { id } },
        fetch: this.#api.fetch(options),
      }),
    );
  }

  /** Whether a payment is fully settled (forwarded). */
  verify(paymentId: string, options?: CallOptions) {
    return unwrap(
      this.#api.http.POST("/api/v1/verify", { body: { paymentId }, fetch: this.#api.fetch(options) }),
    );
  }
}

type Refund = Answer<"/api/v1/payments/{id}/refunds", "get">["refunds"][number];

export class Refunds {
  readonly #api: Api;
  constructor(api: Api) {
    this.#api = api;
  }

  /** Refunds a forwarded payment in part or whole; safe to retry (Idempotency-Key). */
  create(paymentId: string, body: Body<"/api/v1/payments/{id}/refunds", "post">, options?: CreateOptions) {
    return unwrap(
      this.#api.http.POST("/api/v1/payments/{id}/refunds", {
        params: { path: { id: paymentId } },
        body,
        headers: { "Idempotency-Key": keyOf(options) },
        fetch: this.#api.fetch(options),
      }),
    );
  }

  list(paymentId: string, query: Query<"/api/v1/payments/{id}/refunds", "get"> = {}, options?: CallOptions) {
    return unwrap(
      this.#api.http.GET("/api/v1/payments/{id}/refunds", {
        params: { path: { id: paymentId }, query },
        fetch: this.#api.fetch(options),
      }),
    );
  }

  iterate(paymentId: string, options?: CallOptions): AsyncGenerator<Refund> {
    return offsetItems(async (window) => {
      const page = await this.list(paymentId, window, options);
      return { items: page.refunds, total: page.total };
    });
  }
}

type UnmatchedTransfer = Answer<"/api/v1/transfers/unmatched", "get">["transfers"][number];

/** The inbox of transfers that matched no payment (D19). */
export class Transfers {
  readonly #api: Api;
  constructor(api: Api) {
    this.#api = api;
  }

  listUnmatched(query: Query<"/api/v1/transfers/unmatched", "get"> = {}, options?: CallOptions) {
    return unwrap(
      this.#api.http.GET("/api/v1/transfers/unmatched", {
        params: { query },
        fetch: this.#api.fetch(options),
      }),
    );
  }

  iterateUnmatched(options?: CallOptions): AsyncGenerator<UnmatchedTransfer> {
    return offsetItems(async (window) => {
      const page = await this.listUnmatched(window, options);
      return { items: page.transfers, total: page.total };
    });
  }

  attach(id: string, body: Body<"/api/v1/transfers/unmatched/{id}/attach", "post">, options?: CallOptions) {
    return unwrap(
      this.#api.http.POST("/api/v1/transfers/unmatched/{id}/attach", {
        params: { path: { id } },
        body,
        fetch: this.#api.fetch(options),
      }),
    );
  }

  keep(id: string, options?: CallOptions) {
    return unwrap(
      this.#api.http.POST("/api/v1/transfers/unmatched/{id}/keep", {
        params: { path: { id } },
        fetch: this.#api.fetch(options),
      }),
    );
  }

  /** Sends an unmatched transfer back (by default to its sender); safe to retry (Idempotency-Key). */
  return(
    id: string,
    body: Body<"/api/v1/transfers/unmatched/{id}/return", "post"> = {},
    options?: CreateOptions,
  ) {
    return unwrap(
      this.#api.http.POST("/api/v1/transfers/unmatched/{id}/return", {
        params: { path: { id } },
        body,
        headers: { "Idempotency-Key": keyOf(options) },
        fetch: this.#api.fetch(options),
      }),
    );
  }

  /** Sandbox keys only: a payer's transfer to the workspace wallet, as the watcher would see it. */
  simulateIncoming(body: Body<"/api/v1/sandbox/incoming-transfer", "post">, options?: CallOptions) {
    return unwrap(
      this.#api.http.POST("/api/v1/sandbox/incoming-transfer", { body, fetch: this.#api.fetch(options) }),
    );
  }
}
