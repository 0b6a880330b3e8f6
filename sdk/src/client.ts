import createClient from "openapi-fetch";
import { Api } from "./api.ts";
import { Keys, Networks, Settlements, Splits, Webhooks } from "./resources/account.ts";
import { Agents, Wallets } from "./resources/agents.ts";
import { Payments, Refunds, Transfers } from "./resources/payments.ts";
import { Payouts, SmartWallet, Wallet } from "./resources/payouts.ts";
import { Onramp, Swaps } from "./resources/trading.ts";
import type { paths } from "./schema.ts";
import type { RetryPolicy } from "./transport.ts";

export interface PaymentsClientOptions {
  /** A workspace key: `svc_test_…` (sandbox) or `svc_live_…`. */
  apiKey: string;
  /** Where the service answers, e.g. `https://pay.example.com`. */
  baseUrl: string;
  /** Each call's time for all of its attempts together (default 30 s); a call may give its own. */
  timeoutMs?: number;
  /** Retries of a call (default 2 after the first attempt; 0 for none). */
  maxRetries?: number;
  /** The backoff's first and longest waits (defaults 250 ms and 8 s). */
  retryDelays?: { baseMs?: number; maxMs?: number };
  /** A fetch of your own (defaults to the global one). */
  fetch?: typeof fetch;
}

/** The service's API, typed by its own OpenAPI document. */
export class PaymentsClient {
  readonly payments: Payments;
  readonly refunds: Refunds;
  readonly transfers: Transfers;
  readonly payouts: Payouts;
  readonly wallet: Wallet;
  readonly smartWallet: SmartWallet;
  readonly keys: Keys;
  readonly webhooks: Webhooks;
  readonly splits: Splits;
  readonly settlements: Settlements;
  readonly networks: Networks;
  readonly swaps: Swaps;
  readonly onramp: Onramp;
  readonly agents: Agents;
  readonly wallets: Wallets;

  constructor(options: PaymentsClientOptions) {
    if (!options.apiKey) throw new TypeError("apiKey is required");
    if (!options.baseUrl) throw new TypeError("baseUrl is required");
    const retry: RetryPolicy = {
      maxRetries: options.maxRetries ?? 2,
      baseDelayMs: options.retryDelays?.baseMs ?? 250,
      maxDelayMs: options.retryDelays?.maxMs ?? 8_000,
    };
    const api = new Api(createClient<paths>({ baseUrl: options.baseUrl.replace(/\/+$/, "") }), {
      apiKey: options.apiKey,
      timeoutMs: options.timeoutMs ?? 30_000,
      retry,
      fetch: options.fetch ?? globalThis.fetch,
    });
    this.payments = new Payments(api);
    this.refunds = new Refunds(api);
    this.transfers = new Transfers(api);
    this.payouts = new Payouts(api);
    this.wallet = new Wallet(api);
    this.smartWallet = new SmartWallet(api);
    this.keys = new Keys(api);
    this.webhooks = new Webhooks(api);
    this.splits = new Splits(api);
    this.settlements = new Settlements(api);
    this.networks = new Networks(api);
    this.swaps = new Swaps(api);
    this.onramp = new Onramp(api);
    this.agents = new Agents(api);
    this.wallets = new Wallets(api);
  }
}
