import DataLoader from "dataloader";

// Lookups by key that concurrent requests share. Under load most of a request's cost is its
// round trips to the database (each one a socket write that wakes a PostgreSQL backend), and
// many requests that arrive together ask the same kind of question (whose API key is this?).
// A lookup asked for while the event loop handles one round of I/O waits for the end of that
// round (setImmediate), and every lookup asked for in it is answered by ONE query.
//
// Nothing is cached: each lookup is read from the database after it was asked for, so whatever
// was committed before the request arrived (a key revoked a moment ago, on any instance) is
// what it sees, exactly as with a query of its own. Alone, a lookup costs what it did before
// plus the wait for the end of the round, which is no wait when nothing else is running.

const MAX_BATCH = 512;

/**
 * `load` reads the rows of a batch of distinct keys in one query and returns them by key (a key
 * without a row is absent). The returned function looks up one key; a failed query fails every
 * lookup of its batch.
 */
export function coalescedLookup<K, V>(
  load: (keys: readonly K[]) => Promise<Map<K, V>>,
): (key: K) => Promise<V | undefined> {
  const loader = new DataLoader<K, V | undefined>(
    async (keys) => {
      const found = await load(keys);
      return keys.map((key) => found.get(key));
    },
    { cache: false, maxBatchSize: MAX_BATCH, batchScheduleFn: (dispatch) => setImmediate(dispatch) },
  );
  return (key) => loader.load(key);
}
