import DataLoader from "dataloader";

// Writes that concurrent requests share: every write asked for in one round of I/O (see
// coalesced-lookup.ts) is made by ONE statement, so one round trip and one commit serve many
// requests. Each write still commits with all of its own rows (a request's state change and its
// events stay in one transaction), and a write is answered only after the statement committed.
//
// A failed batch is run again one write at a time, so that a write that cannot be made fails
// alone and the others still happen. The statement was atomic: nothing of the failed batch was
// written, and running a write again cannot duplicate it.

const MAX_BATCH = 256;

/** `write` makes a batch of writes (at least one) in one statement. */
export function coalescedWrite<J>(write: (jobs: readonly J[]) => Promise<void>): (job: J) => Promise<void> {
  const loader = new DataLoader<J, true>(
    async (jobs) => {
      try {
        await write(jobs);
        return jobs.map(() => true as const);
      } catch (err) {
        if (jobs.length === 1) return [err instanceof Error ? err : new Error(String(err))];
        return Promise.all(
          jobs.map((job) =>
            write([job]).then(
              () => true as const,
              (e: unknown) => (e instanceof Error ? e : new Error(String(e))),
            ),
          ),
        );
      }
    },
    { cache: false, maxBatchSize: MAX_BATCH, batchScheduleFn: (dispatch) => setImmediate(dispatch) },
  );
  return async (job) => {
    await loader.load(job);
  };
}
