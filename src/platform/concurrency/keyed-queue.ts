// Runs tasks one at a time per key (a wallet, a workspace), in arrival order, within this
// process; tasks of different keys run concurrently. Cross-instance ordering is the database's job.
export class KeyedQueue {
  readonly #tails = new Map<string, Promise<unknown>>();

  /** Whether a task of `key` is running or waiting. */
  busy(key: string): boolean {
    return this.#tails.has(key);
  }

  async run<T>(key: string, task: () => Promise<T>): Promise<T> {
    const previous = this.#tails.get(key) ?? Promise.resolve();
    const next = previous.then(task, task);
    const tail = next.catch(() => undefined);
    this.#tails.set(key, tail);
    try {
      return await next;
    } finally {
      if (this.#tails.get(key) === tail) this.#tails.delete(key);
    }
  }
}
