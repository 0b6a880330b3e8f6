import type { Network } from "./network.ts";

// Whether a network's node answers, as a request about to use it asks (D22: a payment created on
// a network whose node is down answers 503 naming it, rather than waiting for a watcher that
// cannot see it). One probe (the head) per network at a time, its answer kept for a few seconds:
// requests never pile calls up on a node that does not answer, and most cost no call at all. A
// node that answered is trusted while a fresh probe runs behind the request.

export interface HealthOptions {
  /** How long an answer is used before the node is asked again. */
  freshMs: number;
  /** A probe with no answer by then counts as down. */
  timeoutMs: number;
}

export const HEALTH_DEFAULTS: HealthOptions = { freshMs: 5_000, timeoutMs: 2_000 };

export class NetworkHealth {
  readonly #network: Pick<Network, "head">;
  readonly #options: HealthOptions;
  #last: { at: number; answers: boolean } | undefined;
  #probe: Promise<boolean> | undefined;

  constructor(network: Pick<Network, "head">, options: HealthOptions = HEALTH_DEFAULTS) {
    this.#network = network;
    this.#options = options;
  }

  /** Whether the node answered its last probe: a fresh answer, else a new probe's. */
  async answers(): Promise<boolean> {
    const last = this.#last;
    if (last && Date.now() - last.at < this.#options.freshMs) return last.answers;
    const probe = this.#probeOnce();
    // A node that answered is taken to answer still while it is asked again; one that did not
    // (or was never asked) is waited for.
    return last?.answers ? true : probe;
  }

  #probeOnce(): Promise<boolean> {
    this.#probe ??= this.#ask().finally(() => {
      this.#probe = undefined;
    });
    return this.#probe;
  }

  async #ask(): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<false>((resolve) => {
      timer = setTimeout(() => resolve(false), this.#options.timeoutMs);
    });
    const answered = this.#network.head().then(
      () => true,
      () => false,
    );
    try {
      const answers = await Promise.race([answered, timeout]);
      this.#last = { at: Date.now(), answers };
      return answers;
    } finally {
      clearTimeout(timer);
    }
  }
}
