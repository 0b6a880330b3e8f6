// Work the process must let finish before it closes the database: requests still being answered
// (also those whose client has hung up, since Fastify runs their hooks and handler to the end) and
// writes nobody awaits. Shutdown waits for `drained()`; each piece of work is counted once.

export class InFlight {
  #running = 0;
  #waiters: (() => void)[] = [];

  get running(): number {
    return this.#running;
  }

  /** Counts one piece of work; the returned release may be called any number of times. */
  begin(): () => void {
    this.#running += 1;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.#running -= 1;
      if (this.#running === 0) for (const wake of this.#waiters.splice(0)) wake();
    };
  }

  /** Counts `work` until it settles; returns it unchanged. */
  track<T>(work: Promise<T>): Promise<T> {
    const release = this.begin();
    work.then(release, release);
    return work;
  }

  /** Resolves once nothing is running (at once when nothing is). */
  drained(): Promise<void> {
    if (this.#running === 0) return Promise.resolve();
    return new Promise((resolve) => this.#waiters.push(resolve));
  }
}
