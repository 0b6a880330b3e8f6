import { type Answer, type Api, type Body, type Query, unwrap } from "../api.ts";
import { pageItems } from "../paging.ts";
import type { CallOptions } from "../transport.ts";

type Agent = Answer<"/api/agents", "get">["data"]["items"][number];
type WalletView = Answer<"/api/wallets", "get">["data"]["items"][number];
type Authorization = Answer<"/api/wallets/{walletId}/x402/authorizations", "get">["data"]["items"][number];

// Agents and their wallets, with the agent wallets' spending policies and x402 payments
// (docs/api.md part 11, docs/x402.md).

export class Agents {
  readonly #api: Api;
  constructor(api: Api) {
    this.#api = api;
  }

  create(body: Body<"/api/agents/create", "post">, options?: CallOptions) {
    return unwrap(this.#api.http.POST("/api/agents/create", { body, fetch: this.#api.fetch(options) }));
  }

  get(agentId: string, options?: CallOptions) {
    return unwrap(
      this.#api.http.GET("/api/agents/{agentId}", {
        params: { path: { agentId } },
        fetch: this.#api.fetch(options),
      }),
    );
  }

  update(agentId: string, body: Body<"/api/agents/{agentId}", "patch">, options?: CallOptions) {
    return unwrap(
      this.#api.http.PATCH("/api/agents/{agentId}", {
        params: { path: { agentId } },
        body,
        fetch: this.#api.fetch(options),
      }),
    );
  }

  delete(agentId: string, options?: CallOptions) {
    return unwrap(
      this.#api.http.DELETE("/api/agents/{agentId}", {
        params: { path: { agentId } },
        fetch: this.#api.fetch(options),
      }),
    );
  }

  list(query: Query<"/api/agents", "get"> = {}, options?: CallOptions) {
    return unwrap(this.#api.http.GET("/api/agents", { params: { query }, fetch: this.#api.fetch(options) }));
  }

  /** Every agent (matching `search`), newest first, a page at a time. */
  iterate(query: Omit<Query<"/api/agents", "get">, "page" | "limit"> = {}, options?: CallOptions) {
    return pageItems<Agent>(async (window) => {
      const { data } = await this.list({ ...query, ...window }, options);
      return { items: data.items, total: data.pagination.total };
    });
  }
}

export class Wallets {
  readonly #api: Api;
  constructor(api: Api) {
    this.#api = api;
  }

  /** Creates a wallet (a key held by the service) for an agent or a user. */
  create(body: Body<"/api/wallets/create", "post">, options?: CallOptions) {
    return unwrap(this.#api.http.POST("/api/wallets/create", { body, fetch: this.#api.fetch(options) }));
  }

  get(walletId: string, options?: CallOptions) {
    return unwrap(
      this.#api.http.GET("/api/wallets/{walletId}", {
        params: { path: { walletId } },
        fetch: this.#api.fetch(options),
      }),
    );
  }

  list(query: Query<"/api/wallets", "get"> = {}, options?: CallOptions) {
    return unwrap(this.#api.http.GET("/api/wallets", { params: { query }, fetch: this.#api.fetch(options) }));
  }

  /** Every wallet matching `query`, a page at a time. */
  iterate(query: Omit<Query<"/api/wallets", "get">, "page" | "limit"> = {}, options?: CallOptions) {
    return pageItems<WalletView>(async (window) => {
      const { data } = await this.list({ ...query, ...window }, options);
      return { items: data.items, total: data.pagination.total };
    });
  }

  balance(
    walletId: string,
    currency: string,
    query: Query<"/api/wallets/{walletId}/balance/{currency}", "get"> = {},
    options?: CallOptions,
  ) {
    return unwrap(
      this.#api.http.GET("/api/wallets/{walletId}/balance/{currency}", {
        params: { path: { walletId, currency }, query },
        fetch: this.#api.fetch(options),
      }),
    );
  }

  addCurrency(
    walletId: string,
    body: Body<"/api/wallets/{walletId}/currencies", "post">,
    options?: CallOptions,
  ) {
    return unwrap(
      this.#api.http.POST("/api/wallets/{walletId}/currencies", {
        params: { path: { walletId } },
        body,
        fetch: this.#api.fetch(options),
      }),
    );
  }

  policy(walletId: string, options?: CallOptions) {
    return unwrap(
      this.#api.http.GET("/api/wallets/{walletId}/policy", {
        params: { path: { walletId } },
        fetch: this.#api.fetch(options),
      }),
    );
  }

  /** Sets the wallet's whole spending policy. */
  setPolicy(walletId: string, body: Body<"/api/wallets/{walletId}/policy", "put">, options?: CallOptions) {
    return unwrap(
      this.#api.http.PUT("/api/wallets/{walletId}/policy", {
        params: { path: { walletId } },
        body,
        fetch: this.#api.fetch(options),
      }),
    );
  }

  /** Pays an x402 402 answer under the wallet's policy: the signed PAYMENT-SIGNATURE value, or why not. */
  payX402(walletId: string, body: Body<"/api/wallets/{walletId}/x402/pay", "post">, options?: CallOptions) {
    return unwrap(
      this.#api.http.POST("/api/wallets/{walletId}/x402/pay", {
        params: { path: { walletId } },
        body,
        fetch: this.#api.fetch(options),
      }),
    );
  }

  authorizations(
    walletId: string,
    query: Query<"/api/wallets/{walletId}/x402/authorizations", "get"> = {},
    options?: CallOptions,
  ) {
    return unwrap(
      this.#api.http.GET("/api/wallets/{walletId}/x402/authorizations", {
        params: { path: { walletId }, query },
        fetch: this.#api.fetch(options),
      }),
    );
  }

  /** Every x402 authorization of an agent wallet (of a `status`), newest first. */
  iterateAuthorizations(
    walletId: string,
    query: Omit<Query<"/api/wallets/{walletId}/x402/authorizations", "get">, "page" | "limit"> = {},
    options?: CallOptions,
  ) {
    return pageItems<Authorization>(async (window) => {
      const { data } = await this.authorizations(walletId, { ...query, ...window }, options);
      return { items: data.items, total: data.pagination.total };
    });
  }

  authorization(walletId: string, authorizationId: string, options?: CallOptions) {
    return unwrap(
      this.#api.http.GET("/api/wallets/{walletId}/x402/authorizations/{authorizationId}", {
        params: { path: { walletId, authorizationId } },
        fetch: this.#api.fetch(options),
      }),
    );
  }

  /** Approves (and signs) a payment awaiting approval. */
  approve(walletId: string, authorizationId: string, options?: CallOptions) {
    return unwrap(
      this.#api.http.POST("/api/wallets/{walletId}/x402/authorizations/{authorizationId}/approve", {
        params: { path: { walletId, authorizationId } },
        fetch: this.#api.fetch(options),
      }),
    );
  }

  /** Denies a payment awaiting approval: its reservation is released. */
  deny(walletId: string, authorizationId: string, options?: CallOptions) {
    return unwrap(
      this.#api.http.POST("/api/wallets/{walletId}/x402/authorizations/{authorizationId}/deny", {
        params: { path: { walletId, authorizationId } },
        fetch: this.#api.fetch(options),
      }),
    );
  }
}
