// The dispatcher's loop waits for the next poll, or for a reason to claim sooner: a host's queue
// running low, a slot coming free. A reason that comes while the loop is claiming is kept, not
// dropped: that claim may have left the host out, and the next poll may be far away (issue 43).

export class Wakeup {
  #resolve: (() => void) | undefined;
  #asked = false;

  /** Forgets the reasons given so far: the claim about to start covers them. */
  reset(): void {
    this.#asked = false;
  }

  /** Ends the loop's wait now, or, while it claims, the next wait before it starts. */
  ring(): void {
    if (this.#resolve) this.#resolve();
    else this.#asked = true;
  }

  /** Resolves after `ms`, when rung, or at once when rung since the last reset. */
  async wait(ms: number): Promise<void> {
    if (this.#asked) return;
    let timer: NodeJS.Timeout | undefined;
    await new Promise<void>((resolve) => {
      this.#resolve = resolve;
      timer = setTimeout(resolve, ms);
    });
    this.#resolve = undefined;
    clearTimeout(timer);
  }
}
