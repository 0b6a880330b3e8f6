import { type Answer, type Api, type Body, type CreateOptions, keyOf, type Query, unwrap } from "../api.ts";
import { offsetItems } from "../paging.ts";
import type { CallOptions } from "../transport.ts";

// Swaps (D16) and the fiat on-ramp (D17).

type Swap = Answer<"/api/v1/swaps", "get">["swaps"][number];

export class Swaps {
  readonly #api: Api;
  constructor(api: Api) {
    this.#api = api;
  }

  /** A quote, valid 30 s. */
  quote(query: Query<"/api/v1/swap/quote", "get">, options?: CallOptions) {
    return unwrap(
      this.#api.http.GET("/api/v1/swap/quote", { params: { query }, fetch: this.#api.fetch(options) }),
    );
  }

  /** Executes a quote (re-quoted first); safe to retry (Idempotency-Key). */
  execute(body: Body<"/api/v1/swap", "post">, options?: CreateOptions) {
    return unwrap(
      this.#api.http.POST("/api/v1/swap", {
        body,
        headers: { "Idempotency-Key": keyOf(options) },
        fetch: this.#api.fetch(options),
      }),
    );
  }

  list(query: Query<"/api/v1/swaps", "get"> = {}, options?: CallOptions) {
    return unwrap(
      this.#api.http.GET("/api/v1/swaps", { params: { query }, fetch: this.#api.fetch(options) }),
    );
  }

  iterate(options?: CallOptions): AsyncGenerator<Swap> {
    return offsetItems(async (window) => {
      const page = await this.list(window, options);
      return { items: page.swaps, total: page.total };
    });
  }

  get(id: string, options?: CallOptions) {
    return unwrap(
      this.#api.http.GET("/api/v1/swaps/{id}", { params: { path: { id } }, fetch: this.#api.fetch(options) }),
    );
  }
}

type OnrampSession = Answer<"/api/v1/onramp/sessions", "get">["sessions"][number];

export class Onramp {
  readonly #api: Api;
  constructor(api: Api) {
    this.#api = api;
  }

  /** Starts a session: a customer buys crypto with a card, sent to a workspace wallet. */
  createSession(body: Body<"/api/v1/onramp/session", "post">, options?: CallOptions) {
    return unwrap(this.#api.http.POST("/api/v1/onramp/session", { body, fetch: this.#api.fetch(options) }));
  }

  getSession(id: string, options?: CallOptions) {
    return unwrap(
      this.#api.http.GET("/api/v1/onramp/sessions/{id}", {
        params: { path: { id } },
        fetch: this.#api.fetch(options),
      }),
    );
  }

  listSessions(query: Query<"/api/v1/onramp/sessions", "get"> = {}, options?: CallOptions) {
    return unwrap(
      this.#api.http.GET("/api/v1/onramp/sessions", { params: { query }, fetch: this.#api.fetch(options) }),
    );
  }

  iterateSessions(options?: CallOptions): AsyncGenerator<OnrampSession> {
    return offsetItems(async (window) => {
      const page = await this.listSessions(window, options);
      return { items: page.sessions, total: page.total };
    });
  }
}
