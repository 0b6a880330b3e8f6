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

/**
 * `write` makes a batch of writes (at least one) in one statement and answers each, in order
 * (one answer per job).
 */
export function coalescedCall<J, R>(
  write: (jobs: readonly J[]) => Promise<readonly R[]>,
): (job: J) => Promise<R> {
  const answered = async (jobs: readonly J[]): Promise<readonly R[]> => {
    const answers = await write(jobs);
    if (answers.length !== jobs.length)
      throw new Error(`${answers.length} answers for ${jobs.length} writes`);
    return answers;
  };
  const loader = new DataLoader<J, R>(
    async (jobs) => {
      try {
        return await answered(jobs);
      } catch (err) {
        if (jobs.length === 1) return [asError(err)];
        return Promise.all(jobs.map((job) => answered([job]).then((answers) => answers[0] as R, asError)));
      }
    },
    { cache: false, maxBatchSize: MAX_BATCH, batchScheduleFn: (dispatch) => setImmediate(dispatch) },
  );
  return (job) => loader.load(job);
}

/** `write` makes a batch of writes (at least one) in one statement. */
export function coalescedWrite<J>(write: (jobs: readonly J[]) => Promise<void>): (job: J) => Promise<void> {
  const call = coalescedCall<J, true>(async (jobs) => {
    await write(jobs);
    return jobs.map(() => true as const);
  });
  return async (job) => {
    await call(job);
  };
}

function asError(err: unknown): Error {
  return err instanceof Error ? err : new Error(String(err));
}
