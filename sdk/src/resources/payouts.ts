import { type Answer, type Api, type Body, type CreateOptions, keyOf, type Query, unwrap } from "../api.ts";
import { offsetItems } from "../paging.ts";
import type { CallOptions } from "../transport.ts";

type Payout = Answer<"/api/v1/payouts", "get">["payouts"][number];

// Payouts, the workspace wallet and its smart wallet (docs/api.md parts 3, 4 and 6).

export class Payouts {
  readonly #api: Api;
  constructor(api: Api) {
    this.#api = api;
  }

  /**
   * Sends a payout and waits for its receipt. Safe to retry: the idempotency key travels in the
   * body (`idempotencyKey`), as this route takes it.
   */
  create(body: Omit<Body<"/api/v1/payouts", "post">, "idempotencyKey">, options?: CreateOptions) {
    return unwrap(
      this.#api.http.POST("/api/v1/payouts", {
        body: { ...body, idempotencyKey: keyOf(options) },
        fetch: this.#api.fetch({ ...options, bodyHasKey: true }),
      }),
    );
  }

  list(query: Query<"/api/v1/payouts", "get"> = {}, options?: CallOptions) {
    return unwrap(
      this.#api.http.GET("/api/v1/payouts", { params: { query }, fetch: this.#api.fetch(options) }),
    );
  }

  /** Every completed payout, newest first, a page at a time. */
  iterate(options?: CallOptions): AsyncGenerator<Payout> {
    return offsetItems(async (window) => {
      const page = await this.list(window, options);
      return { items: page.payouts, total: page.total };
    });
  }

  /** The circuit breaker of the key's environment. */
  state(workspaceId: string, options?: CallOptions) {
    return unwrap(
      this.#api.http.GET("/api/v1/workspaces/{id}/payout-state", {
        params: { path: { id: workspaceId } },
        fetch: this.#api.fetch(options),
      }),
    );
  }

  /** Resumes payouts the circuit breaker paused. */
  resume(workspaceId: string, options?: CallOptions) {
    return unwrap(
      this.#api.http.POST("/api/v1/workspaces/{id}/resume", {
        params: { path: { id: workspaceId } },
        fetch: this.#api.fetch(options),
      }),
    );
  }
}

export class Wallet {
  readonly #api: Api;
  constructor(api: Api) {
    this.#api = api;
  }

  balance(options?: CallOptions) {
    return unwrap(this.#api.http.GET("/api/v1/wallet/balance", { fetch: this.#api.fetch(options) }));
  }

  stats(options?: CallOptions) {
    return unwrap(this.#api.http.GET("/api/v1/wallet/stats", { fetch: this.#api.fetch(options) }));
  }

  /** Sandbox keys only: credits the workspace wallet on the simulated ledger. */
  faucet(body: Body<"/api/v1/sandbox/faucet", "post">, options?: CallOptions) {
    return unwrap(this.#api.http.POST("/api/v1/sandbox/faucet", { body, fetch: this.#api.fetch(options) }));
  }
}

export type SmartWalletView = Answer<"/api/v1/workspaces/{id}/smart-wallet", "get">;

export class SmartWallet {
  readonly #api: Api;
  constructor(api: Api) {
    this.#api = api;
  }

  get(workspaceId: string, options?: CallOptions) {
    return unwrap(
      this.#api.http.GET("/api/v1/workspaces/{id}/smart-wallet", {
        params: { path: { id: workspaceId } },
        fetch: this.#api.fetch(options),
      }),
    );
  }

  /** Creates the workspace's smart wallet (an existing one is returned). */
  create(
    workspaceId: string,
    body: Body<"/api/v1/workspaces/{id}/smart-wallet", "post"> = {},
    options?: CallOptions,
  ) {
    return unwrap(
      this.#api.http.POST("/api/v1/workspaces/{id}/smart-wallet", {
        params: { path: { id: workspaceId } },
        body,
        fetch: this.#api.fetch(options),
      }),
    );
  }

  /** Chooses the wallet used when a request names none. */
  setDefault(
    workspaceId: string,
    body: Body<"/api/v1/workspaces/{id}/smart-wallet", "patch">,
    options?: CallOptions,
  ) {
    return unwrap(
      this.#api.http.PATCH("/api/v1/workspaces/{id}/smart-wallet", {
        params: { path: { id: workspaceId } },
        body,
        fetch: this.#api.fetch(options),
      }),
    );
  }
}
