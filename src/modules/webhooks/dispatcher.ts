import pLimit, { type LimitFunction } from "p-limit";
import { Agent, request } from "undici";
import type { AppContext } from "../../context.ts";
import { deliveryBody } from "../../domain/events.ts";
import {
  DISABLE_AFTER_MS,
  nextRetryDelay,
  parseRetryAfter,
  RETRY_DELAYS_MS,
} from "../../domain/retry-schedule.ts";
import {
  assertLiteralHostAllowed,
  type DestinationPolicy,
  destinationPolicy,
  guardedLookup,
  outboundErrorText,
  type Resolver,
  systemResolver,
} from "../../platform/http/outbound-guard.ts";
import { signBody, signTimestamped } from "../../platform/secrets/signing.ts";
import * as claims from "./delivery-claims-repo.ts";
import { AttemptRecorder } from "./recorder.ts";
import * as repo from "./repo.ts";
import { standardSignature, standardSigner } from "./secrets.ts";
import { Wakeup } from "./wakeup.ts";

// Delivers webhook deliveries: claims due rows (SKIP LOCKED, with a lease), signs and POSTs each
// with a keep-alive client, records the attempt and schedules the next one; the attempts that end
// together are recorded together (AttemptRecorder). Any number of dispatchers, in one process or
// many, can run against one database: a claim is exclusive until its lease runs out, and the
// lease is longer than the request timeout.

export interface DispatcherOptions {
  pollIntervalMs?: number;
  batchSize?: number;
  /**
   * Deliveries being sent or recorded. Those waiting for a slot to their host do not count: a slow
   * host holds `perHostConcurrency` of these at most, and the others' deliveries still go out.
   */
  maxInFlight?: number;
  /** Concurrent requests to one host, so one slow merchant cannot take every slot. */
  perHostConcurrency?: number;
  timeoutMs?: number;
  leaseMs?: number;
  retryDelaysMs?: readonly number[];
  random?: () => number;
  /** Resolves destination names; tests map made-up names to the addresses they need. */
  resolve?: Resolver;
}

const USER_AGENT = "payments-service-webhooks/1.0";

/**
 * A registration's decrypted secret for our own headers, and its Standard Webhooks signers (D24):
 * the current secret's first, then the one a rotation replaced while it still signs.
 */
interface Signing {
  secret: string;
  signers: ReturnType<typeof standardSigner>[];
}

interface SendResult {
  delivered: boolean;
  responseCode: number | null;
  error: string | null;
  retryAfterMs: number | null;
}

export class WebhookDispatcher {
  readonly #ctx: AppContext;
  readonly #opts: Required<DispatcherOptions>;
  /** One connection pool per destination policy (D7); `any` is WEBHOOK_ALLOW_PRIVATE's. */
  readonly #agents: Record<DestinationPolicy, Agent>;
  readonly #hostLimits = new Map<string, LimitFunction>();
  /** Each registration's host limiter, as its claimed deliveries named it. */
  readonly #endpointLimits = new Map<number, LimitFunction>();
  /** Every delivery claimed and not finished; `#waiting` of them wait for a slot to their host. */
  readonly #inFlight = new Set<Promise<void>>();
  #waiting = 0;
  /** When runOnce next looks for due probes (ms since the epoch). */
  #nextProbeLook = 0;
  readonly #recorder: AttemptRecorder;
  readonly #health: repo.HealthSettings;
  #running = false;
  #loop: Promise<void> | undefined;
  /** The stop, once asked for. */
  #stopped: Promise<void> | undefined;
  readonly #wakeup = new Wakeup();

  constructor(ctx: AppContext, options: DispatcherOptions = {}) {
    this.#ctx = ctx;
    this.#health = {
      disableAfterMs: DISABLE_AFTER_MS,
      backlogPerSecond: ctx.config.webhookEndpointRatePerSecond,
      probeMs: ctx.config.webhookProbeSeconds * 1000,
    };
    this.#opts = {
      pollIntervalMs: options.pollIntervalMs ?? 200,
      batchSize: options.batchSize ?? 100,
      maxInFlight: options.maxInFlight ?? 256,
      perHostConcurrency: options.perHostConcurrency ?? 32,
      timeoutMs: options.timeoutMs ?? 10_000,
      leaseMs: options.leaseMs ?? 60_000,
      retryDelaysMs: options.retryDelaysMs ?? RETRY_DELAYS_MS,
      random: options.random ?? Math.random,
      resolve: options.resolve ?? systemResolver,
    };
    const common = { keepAliveTimeout: 30_000, connections: this.#opts.perHostConcurrency };
    // The resolved address is checked inside the socket's lookup, before it connects.
    const guarded = (policy: DestinationPolicy) =>
      new Agent({ ...common, connect: { lookup: guardedLookup(policy, this.#opts.resolve) } });
    this.#agents = { public: guarded("public"), any: guarded("any") };
    const health = this.#health;
    this.#recorder = new AttemptRecorder((records) => repo.recordAttempts(ctx.db, records, health), ctx.log);
  }

  start(): void {
    // Its connections close when it stops: a stopped dispatcher has none to send with.
    if (this.#stopped) throw new Error("webhook dispatcher: started again after it stopped");
    if (this.#running) return;
    this.#running = true;
    this.#loop = this.#run();
  }

  /**
   * Stops claiming, waits for requests in flight to be recorded, closes the connections. Called
   * again (by two owners of a shutdown), it answers when the first call's stop is done.
   */
  stop(): Promise<void> {
    this.#stopped ??= this.#stop();
    return this.#stopped;
  }

  async #stop(): Promise<void> {
    this.#running = false;
    this.#wakeup.ring();
    await this.#loop;
    await Promise.allSettled([...this.#inFlight]);
    await Promise.all(Object.values(this.#agents).map((agent) => agent.close()));
  }

  async #run(): Promise<void> {
    while (this.#running) {
      this.#wakeup.reset();
      let claimed = 0;
      try {
        claimed = await this.runOnce();
      } catch (err) {
        this.#ctx.log.error({ err }, "webhook dispatcher: claim failed");
      }
      // A full batch means more is probably due: claim again at once while slots are free.
      if (claimed > 0 && this.#busy() < this.#opts.maxInFlight) continue;
      await this.#wakeup.wait(this.#opts.pollIntervalMs);
    }
  }

  /** One claim round; returns how many deliveries it started. Exposed for tests and benchmarks. */
  async runOnce(): Promise<number> {
    const free = this.#opts.maxInFlight - this.#busy();
    if (free <= 0) return 0;
    const now = this.#ctx.now();
    // A registration whose host already has a claim's worth of deliveries waiting is left out of
    // the claim: more of them could not be sent sooner, and the queue of each host stays one to
    // two claims long, so a slow registration cannot take the slots of the others (issue 43). A
    // shorter queue is filled before it runs dry: on a busy event loop a claim takes tens of ms,
    // and a fast host would otherwise sit idle while its next one is under way.
    const hostBusy = [...this.#endpointLimits]
      .filter(([, limit]) => limit.pendingCount >= this.#opts.batchSize)
      .map(([endpointId]) => endpointId);
    const lease = new Date(now.getTime() + this.#opts.leaseMs);
    const claimed = await claims.claimDueDeliveries(
      this.#ctx.db,
      now,
      lease,
      Math.min(free, this.#opts.batchSize),
      hostBusy,
    );
    claimed.push(...(await this.#claimProbes(now, lease, free - claimed.length, hostBusy)));
    // A registration's secrets are decrypted once per claimed batch, not once per delivery.
    const secrets = new Map<number, Signing | null>();
    for (const delivery of claimed) {
      let signing = secrets.get(delivery.endpointId);
      if (signing === undefined) {
        signing = this.#signing(delivery);
        secrets.set(delivery.endpointId, signing);
      }
      const task = this.#deliver(delivery, signing).finally(() => {
        this.#inFlight.delete(task);
        if (this.#busy() === this.#opts.maxInFlight - 1) this.#wakeup.ring();
      });
      this.#inFlight.add(task);
    }
    return claimed.length;
  }

  /**
   * The probes due (claimProbes), looked for once a second at most: they are due seconds apart.
   * A claim that fails is logged and leaves the round's other deliveries to go out as claimed.
   */
  async #claimProbes(
    now: Date,
    lease: Date,
    free: number,
    hostBusy: number[],
  ): Promise<claims.ClaimedDelivery[]> {
    const { probeMs } = this.#health;
    if (now.getTime() < this.#nextProbeLook || free <= 0) return [];
    this.#nextProbeLook = now.getTime() + Math.min(1000, probeMs);
    try {
      const limit = Math.min(free, this.#opts.batchSize);
      return await claims.claimProbes(this.#ctx.db, now, lease, probeMs, limit, hostBusy);
    } catch (err) {
      this.#ctx.log.error({ err }, "webhook dispatcher: probe claim failed");
      return [];
    }
  }

  /** Resolves when nothing is in flight (tests). */
  async drain(): Promise<void> {
    while (this.#inFlight.size > 0) await Promise.allSettled([...this.#inFlight]);
  }

  /** Deliveries being sent or recorded (not those waiting for their host). */
  #busy(): number {
    return this.#inFlight.size - this.#waiting;
  }

  #limitFor(url: string): LimitFunction {
    let host: string;
    try {
      host = new URL(url).host;
    } catch {
      host = url;
    }
    let limit = this.#hostLimits.get(host);
    if (!limit) {
      limit = pLimit(this.#opts.perHostConcurrency);
      this.#hostLimits.set(host, limit);
    }
    return limit;
  }

  #decryptSecret(encrypted: string): string | null {
    try {
      return this.#ctx.secrets.decrypt(encrypted);
    } catch {
      return null;
    }
  }

  /** The delivery's registration's secrets; null when the current one cannot be decrypted. */
  #signing(delivery: claims.ClaimedDelivery): Signing | null {
    const secret = this.#decryptSecret(delivery.encryptedSecret);
    if (secret === null) return null;
    const previous =
      delivery.previousEncryptedSecret === null
        ? null
        : this.#decryptSecret(delivery.previousEncryptedSecret);
    return {
      secret,
      signers:
        previous === null ? [standardSigner(secret)] : [standardSigner(secret), standardSigner(previous)],
    };
  }

  /** Sends one delivery and queues its outcome; resolves once the outcome is written (or given up). */
  async #deliver(delivery: claims.ClaimedDelivery, signing: Signing | null): Promise<void> {
    let seconds = 0;
    const limit = this.#limitFor(delivery.url);
    this.#endpointLimits.set(delivery.endpointId, limit);
    this.#waiting++;
    const outcome = await limit(async () => {
      this.#waiting--;
      // The host's queue fell below a claim's worth: its registrations can be claimed again.
      if (limit.pendingCount === this.#opts.batchSize - 1) this.#wakeup.ring();
      const started = performance.now();
      const result = await this.#attempt(delivery, signing);
      seconds = (performance.now() - started) / 1000;
      return result;
    });
    if (!outcome) return;
    const at = this.#ctx.now();
    let next: Date | null = null;
    if (!outcome.delivered) {
      const delay = nextRetryDelay(
        delivery.attempts + 1,
        this.#opts.random(),
        outcome.retryAfterMs,
        this.#opts.retryDelaysMs,
      );
      next = delay === null ? null : new Date(at.getTime() + delay);
    }
    this.#ctx.metrics.webhookAttempt(outcome.delivered ? "delivered" : next ? "retrying" : "failed", seconds);
    await this.#recorder.record({
      deliveryId: delivery.id,
      endpointId: delivery.endpointId,
      lease: delivery.lease,
      at,
      delivered: outcome.delivered,
      responseCode: outcome.responseCode,
      error: outcome.error,
      nextAttemptAt: next,
      aheadOfSchedule: delivery.aheadOfSchedule,
    });
  }

  /** One POST, or null when the claim's lease ran out before a slot to the host was free. */
  async #attempt(delivery: claims.ClaimedDelivery, signing: Signing | null): Promise<SendResult | null> {
    // Another dispatcher may have claimed it since: sending under the old claim would be a
    // duplicate whose outcome could not be recorded. It is due again, like after a crash.
    if (this.#ctx.now() >= delivery.lease) return null;
    if (signing === null) {
      return {
        delivered: false,
        responseCode: null,
        error: "signing secret cannot be decrypted",
        retryAfterMs: null,
      };
    }
    const body = JSON.stringify(
      deliveryBody(delivery.eventType, delivery.payload, delivery.id, delivery.createdAt),
    );
    const timestamp = Math.floor(this.#ctx.now().getTime() / 1000);
    const { secret, signers } = signing;
    const policy = destinationPolicy(this.#ctx.config.webhookAllowPrivate);
    try {
      const url = new URL(delivery.url);
      assertLiteralHostAllowed(url, policy);
      const response = await request(url, {
        method: "POST",
        body,
        headers: {
          "content-type": "application/json",
          "user-agent": USER_AGENT,
          "x-service-signature": signBody(secret, body),
          "x-service-event": delivery.eventType,
          "x-service-delivery": delivery.id,
          "x-service-timestamp": String(timestamp),
          "x-service-signature-v2": signTimestamped(secret, timestamp, body),
          // Standard Webhooks 1.0 (D24): the same delivery id and unix seconds.
          "webhook-id": delivery.id,
          "webhook-timestamp": String(timestamp),
          "webhook-signature": standardSignature(signers, delivery.id, new Date(timestamp * 1000), body),
        },
        dispatcher: this.#agents[policy],
        signal: AbortSignal.timeout(this.#opts.timeoutMs),
      });
      // Read and discard: the answer's body means nothing to us, but the socket must be freed.
      await response.body.dump({ limit: 64 * 1024 }).catch(() => {});
      const ok = response.statusCode >= 200 && response.statusCode < 300;
      const retryAfter = response.headers["retry-after"];
      return {
        delivered: ok,
        responseCode: response.statusCode,
        error: ok ? null : `HTTP ${response.statusCode}`,
        retryAfterMs: parseRetryAfter(
          Array.isArray(retryAfter) ? retryAfter[0] : retryAfter,
          this.#ctx.now(),
        ),
      };
    } catch (err) {
      const reason =
        err instanceof Error && (err.name === "TimeoutError" || err.name === "AbortError")
          ? `timed out after ${this.#opts.timeoutMs} ms`
          : outboundErrorText(err);
      return { delivered: false, responseCode: null, error: reason.slice(0, 500), retryAfterMs: null };
    }
  }
}
