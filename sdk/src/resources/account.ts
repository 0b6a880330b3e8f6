import { type Answer, type Api, type Body, type Query, unwrap } from "../api.ts";
import { offsetItems } from "../paging.ts";
import type { CallOptions } from "../transport.ts";

// Keys, webhook endpoints, splits and settlements, and the networks (docs/api.md parts 1, 7, 10).

export class Keys {
  readonly #api: Api;
  constructor(api: Api) {
    this.#api = api;
  }

  /** Creates a key of the caller's workspace; the full key is in this answer only. */
  create(body: Body<"/api/v1/keys", "post">, options?: CallOptions) {
    return unwrap(this.#api.http.POST("/api/v1/keys", { body, fetch: this.#api.fetch(options) }));
  }

  list(options?: CallOptions) {
    return unwrap(this.#api.http.GET("/api/v1/keys", { fetch: this.#api.fetch(options) }));
  }

  revoke(id: string, options?: CallOptions) {
    return unwrap(
      this.#api.http.DELETE("/api/v1/keys/{id}", {
        params: { path: { id } },
        fetch: this.#api.fetch(options),
      }),
    );
  }
}

type Delivery = Answer<"/api/v1/webhooks/{id}/deliveries", "get">["deliveries"][number];

export class Webhooks {
  readonly #api: Api;
  constructor(api: Api) {
    this.#api = api;
  }

  /** Registers an endpoint; its signing secret is in this answer only. */
  create(body: Body<"/api/v1/webhooks", "post">, options?: CallOptions) {
    return unwrap(this.#api.http.POST("/api/v1/webhooks", { body, fetch: this.#api.fetch(options) }));
  }

  list(options?: CallOptions) {
    return unwrap(this.#api.http.GET("/api/v1/webhooks", { fetch: this.#api.fetch(options) }));
  }

  delete(id: string, options?: CallOptions) {
    return unwrap(
      this.#api.http.DELETE("/api/v1/webhooks/{id}", {
        params: { path: { id } },
        fetch: this.#api.fetch(options),
      }),
    );
  }

  deliveries(
    id: string,
    query: Query<"/api/v1/webhooks/{id}/deliveries", "get"> = {},
    options?: CallOptions,
  ) {
    return unwrap(
      this.#api.http.GET("/api/v1/webhooks/{id}/deliveries", {
        params: { path: { id }, query },
        fetch: this.#api.fetch(options),
      }),
    );
  }

  iterateDeliveries(id: string, options?: CallOptions): AsyncGenerator<Delivery> {
    return offsetItems(async (window) => {
      const page = await this.deliveries(id, window, options);
      return { items: page.deliveries, total: page.total };
    });
  }

  /** A new signing secret; for 24 h both the new and the previous one sign (D24). */
  rotateSecret(id: string, options?: CallOptions) {
    return unwrap(
      this.#api.http.POST("/api/v1/webhooks/{id}/rotate-secret", {
        params: { path: { id } },
        fetch: this.#api.fetch(options),
      }),
    );
  }

  /** Sends a delivery again now (same delivery id). */
  retryDelivery(id: string, deliveryId: string, options?: CallOptions) {
    return unwrap(
      this.#api.http.POST("/api/v1/webhooks/{id}/deliveries/{deliveryId}/retry", {
        params: { path: { id, deliveryId } },
        fetch: this.#api.fetch(options),
      }),
    );
  }
}

export class Splits {
  readonly #api: Api;
  constructor(api: Api) {
    this.#api = api;
  }

  get(options?: CallOptions) {
    return unwrap(this.#api.http.GET("/api/v1/splits", { fetch: this.#api.fetch(options) }));
  }

  /** Replaces the configuration (payments created from now on). */
  replace(body: Body<"/api/v1/splits", "put">, options?: CallOptions) {
    return unwrap(this.#api.http.PUT("/api/v1/splits", { body, fetch: this.#api.fetch(options) }));
  }
}

type Settlement = Answer<"/api/v1/settlements", "get">["settlements"][number];

export class Settlements {
  readonly #api: Api;
  constructor(api: Api) {
    this.#api = api;
  }

  list(query: Query<"/api/v1/settlements", "get"> = {}, options?: CallOptions) {
    return unwrap(
      this.#api.http.GET("/api/v1/settlements", { params: { query }, fetch: this.#api.fetch(options) }),
    );
  }

  iterate(query: Omit<Query<"/api/v1/settlements", "get">, "limit" | "offset"> = {}, options?: CallOptions) {
    return offsetItems<Settlement>(async (window) => {
      const page = await this.list({ ...query, ...window }, options);
      return { items: page.settlements, total: page.total };
    });
  }

  get(id: string, options?: CallOptions) {
    return unwrap(
      this.#api.http.GET("/api/v1/settlements/{id}", {
        params: { path: { id } },
        fetch: this.#api.fetch(options),
      }),
    );
  }
}

export class Networks {
  readonly #api: Api;
  constructor(api: Api) {
    this.#api = api;
  }

  /** The networks of the key's environment, the default first. */
  list(options?: CallOptions) {
    return unwrap(this.#api.http.GET("/api/v1/networks", { fetch: this.#api.fetch(options) }));
  }
}
