// A read that callers asking meanwhile share, per key, for as long as it is in flight; the first
// caller after it settles (answered or failed) reads afresh. Nothing is kept: this only spares a
// node or a database the same question asked twice at once, where any answer read after the
// question was asked is as good as another (the wallet's funds, the node's count and fees).
export class SharedReads<V> {
  readonly #inFlight = new Map<string, Promise<V>>();

  /** The read of `key` in flight, else `read()` begun now and shared until it settles. */
  share(key: string, read: () => Promise<V>): Promise<V> {
    const inFlight = this.#inFlight.get(key);
    if (inFlight) return inFlight;
    const begun: Promise<V> = read().finally(() => {
      if (this.#inFlight.get(key) === begun) this.#inFlight.delete(key);
    });
    this.#inFlight.set(key, begun);
    return begun;
  }
}
