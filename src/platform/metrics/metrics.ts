import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";
import type { OnNetwork } from "../../chain/network.ts";

// What an operator alerts on, in Prometheus' text format (prom-client). Labels are kinds, never
// tenants: no workspace, payment or address ever becomes a label (cardinality). Counters count
// what this process did, after its database transaction committed; Prometheus sums instances.
// Gauges read at scrape time (paused workspaces, the webhook backlog, the pools) come from the
// sources the app hands in. Off (no METRICS_PORT or METRICS_TOKEN), every method does nothing.

export type Outcome = "completed" | "failed";
export type AttemptOutcome = "delivered" | "retrying" | "failed";

/** What the gauges read when Prometheus scrapes. */
export interface MetricSources {
  pausedWorkspaces(): Promise<Array<{ environment: string; count: number }>>;
  webhookBacklog(): Promise<{ due: number; oldestDueAgeSeconds: number }>;
  /** Connection pools of a PostgreSQL server; none on the embedded database. */
  pools(): Array<{ pool: string; total: number; idle: number; waiting: number }>;
  /** On-ramp sessions of the last week fulfilled at the provider and never credited, by why (onramp/). */
  stuckOnrampSessions(): Promise<Array<{ environment: string; reason: string; count: number }>>;
}

const HTTP_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
const WEBHOOK_BUCKETS = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

export class Metrics {
  readonly registry = new Registry();
  readonly enabled: boolean;
  readonly #http: Histogram<"method" | "route" | "status_class">;
  readonly #httpChildren = new Map<string, { observe(value: number): void }>();
  readonly #payments: Counter<"rail" | "environment" | "status">;
  readonly #payouts: Counter<"outcome" | "wallet_type" | "environment">;
  readonly #transfers: Counter<"kind" | "outcome" | "wallet_type" | "environment" | "network">;
  readonly #trips: Counter<"environment">;
  readonly #attempts: Counter<"outcome">;
  readonly #attemptSeconds: Histogram<"outcome">;
  readonly #topUps: Counter<"environment" | "outcome">;
  /** Per network whose chain job this process leads (by `environment network`): the last tick's end, head and cursor. */
  readonly #watchers = new Map<string, { on: OnNetwork; at: number; head: bigint; cursor: bigint }>();
  #sources: MetricSources | undefined;

  constructor(enabled: boolean) {
    this.enabled = enabled;
    const registers = [this.registry];
    if (enabled) collectDefaultMetrics({ register: this.registry });
    this.#http = new Histogram({
      name: "http_request_duration_seconds",
      help: "HTTP requests by route (its pattern) and status class, from arrival to answer",
      labelNames: ["method", "route", "status_class"],
      buckets: HTTP_BUCKETS,
      registers,
    });
    this.#payments = new Counter({
      name: "payment_transitions_total",
      help: "Payments that entered a status (pending at creation), by rail and environment",
      labelNames: ["rail", "environment", "status"],
      registers,
    });
    this.#payouts = new Counter({
      name: "payouts_total",
      help: "Payouts that ended, by outcome and wallet type (payouts only; every kind: transfers_total)",
      labelNames: ["outcome", "wallet_type", "environment"],
      registers,
    });
    this.#transfers = new Counter({
      name: "transfers_total",
      help: "Transfers out of workspace wallets that ended, by kind (payout, refund, return, swap, settlement), outcome, wallet type and network",
      labelNames: ["kind", "outcome", "wallet_type", "environment", "network"],
      registers,
    });
    this.#trips = new Counter({
      name: "circuit_breaker_trips_total",
      help: "Times a workspace's payouts were paused by the circuit breaker",
      labelNames: ["environment"],
      registers,
    });
    this.#gauge(
      "workspaces_paused",
      "Workspaces whose payouts are paused by the circuit breaker now",
      ["environment"],
      async (gauge) => {
        for (const { environment, count } of (await this.#sources?.pausedWorkspaces()) ?? []) {
          gauge.set({ environment }, count);
        }
      },
    );
    this.#attempts = new Counter({
      name: "webhook_delivery_attempts_total",
      help: "Webhook delivery attempts: delivered, failed with a retry due, or failed for good",
      labelNames: ["outcome"],
      registers,
    });
    this.#attemptSeconds = new Histogram({
      name: "webhook_delivery_attempt_duration_seconds",
      help: "How long a webhook delivery attempt took, from request to answer (or error)",
      labelNames: ["outcome"],
      buckets: WEBHOOK_BUCKETS,
      registers,
    });
    const backlog = async () => (await this.#sources?.webhookBacklog()) ?? { due: 0, oldestDueAgeSeconds: 0 };
    this.#gauge(
      "webhook_deliveries_due",
      "Webhook deliveries due now and not delivered yet (all instances)",
      [],
      async (gauge) => gauge.set((await backlog()).due),
    );
    this.#gauge(
      "webhook_oldest_due_delivery_age_seconds",
      "How long the oldest due webhook delivery has been waiting (0 when none is due)",
      [],
      async (gauge) => gauge.set((await backlog()).oldestDueAgeSeconds),
    );
    this.#gauge(
      "chain_watcher_lag_blocks",
      "Chain head minus the last block the watcher processed, on the instance leading the chain job",
      ["environment", "network"],
      (gauge) => {
        for (const w of this.#watchers.values())
          gauge.set({ environment: w.on.environment, network: w.on.id }, Number(w.head - w.cursor));
      },
    );
    this.#gauge(
      "chain_watcher_last_tick_age_seconds",
      "Seconds since the chain watcher last finished a tick, on the instance leading the chain job",
      ["environment", "network"],
      (gauge) => {
        for (const w of this.#watchers.values())
          gauge.set({ environment: w.on.environment, network: w.on.id }, (Date.now() - w.at) / 1000);
      },
    );
    this.#gauge(
      "onramp_sessions_stuck",
      "On-ramp sessions made in the last 7 days that the provider fulfilled and that were never credited: " +
        "no transaction named an hour after fulfilment, or confirmation given up",
      ["environment", "reason"],
      async (gauge) => {
        for (const { environment, reason, count } of (await this.#sources?.stuckOnrampSessions()) ?? [])
          gauge.set({ environment, reason }, count);
      },
    );
    this.#topUps = new Counter({
      name: "gas_topups_total",
      help: "Gas top-ups of workspace wallets, by outcome (success, reverted, pending)",
      labelNames: ["environment", "outcome"],
      registers,
    });
    this.#gauge(
      "db_pool_connections",
      "Connections of the service's PostgreSQL pools, in use or idle",
      ["pool", "state"],
      (gauge) => {
        for (const p of this.#sources?.pools() ?? []) {
          gauge.set({ pool: p.pool, state: "in_use" }, p.total - p.idle);
          gauge.set({ pool: p.pool, state: "idle" }, p.idle);
        }
      },
    );
    this.#gauge(
      "db_pool_waiting",
      "Queries waiting for a connection of the service's PostgreSQL pools",
      ["pool"],
      (gauge) => {
        for (const p of this.#sources?.pools() ?? []) gauge.set({ pool: p.pool }, p.waiting);
      },
    );
  }

  /** A gauge read at scrape time: `read` sets its values afresh (labels it leaves out are gone). */
  #gauge<L extends string>(
    name: string,
    help: string,
    labelNames: L[],
    read: (gauge: Gauge<L>) => void | Promise<void>,
  ): void {
    const gauge: Gauge<L> = new Gauge({
      name,
      help,
      labelNames,
      registers: [this.registry],
      collect: async () => {
        gauge.reset();
        await read(gauge);
      },
    });
  }

  setSources(sources: MetricSources): void {
    this.#sources = sources;
  }

  httpRequest(method: string, route: string | undefined, statusCode: number, seconds: number): void {
    if (!this.enabled) return;
    const statusClass = Math.floor(statusCode / 100);
    // One child per method, route and class, found by a string key: observing through it skips
    // prom-client's hashing of the label object on every request.
    const key = `${method} ${statusClass} ${route ?? ""}`;
    let child = this.#httpChildren.get(key);
    if (!child) {
      child = this.#http.labels({ method, route: route ?? "unmatched", status_class: `${statusClass}xx` });
      this.#httpChildren.set(key, child);
    }
    child.observe(seconds);
  }

  /** Payments that entered `status` (committed). */
  paymentsMoved(rows: ReadonlyArray<{ payment_method: string; environment: string }>, status: string): void {
    if (!this.enabled) return;
    for (const row of rows)
      this.#payments.inc({ rail: row.payment_method, environment: row.environment, status });
  }

  /** A transfer of any kind ended: counted under its kind; a payout's in payouts_total too. */
  transferEnded(
    outcome: Outcome,
    row: { kind: string; wallet_type: string; environment: string; network: string },
  ): void {
    if (!this.enabled) return;
    const { kind, wallet_type, environment, network } = row;
    this.#transfers.inc({ kind, outcome, wallet_type, environment, network });
    if (kind === "payout") this.#payouts.inc({ outcome, wallet_type, environment });
  }

  breakerTripped(environment: string): void {
    if (this.enabled) this.#trips.inc({ environment });
  }

  webhookAttempt(outcome: AttemptOutcome, seconds: number): void {
    if (!this.enabled) return;
    this.#attempts.inc({ outcome });
    this.#attemptSeconds.observe({ outcome }, seconds);
  }

  chainWatcherTicked(on: OnNetwork, head: bigint, cursor: bigint): void {
    if (this.enabled) this.#watchers.set(`${on.environment} ${on.id}`, { on, at: Date.now(), head, cursor });
  }

  /** This process no longer leads the network's chain job: another instance reports it. */
  chainWatcherStoodDown(on: OnNetwork): void {
    this.#watchers.delete(`${on.environment} ${on.id}`);
  }

  gasTopUp(environment: string, outcome: string): void {
    if (this.enabled) this.#topUps.inc({ environment, outcome });
  }
}
