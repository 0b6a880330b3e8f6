import type { AppContext } from "../../context.ts";
import type { AttemptRecord } from "./repo.ts";

// Group commit of attempt outcomes: the attempts that end while a batch is being written wait
// and go together in the next one, so the database sees one transaction per batch instead of one
// per delivery. When idle, an outcome is written on the next turn of the event loop; under load
// the batches grow by themselves to what the database can take. A batch is never larger than the
// dispatcher's requests in flight, since each waits for its outcome to be written.

export type WriteAttempts = (records: AttemptRecord[]) => Promise<Set<string>>;

interface Queued {
  record: AttemptRecord;
  done: () => void;
}

export class AttemptRecorder {
  readonly #write: WriteAttempts;
  readonly #log: AppContext["log"];
  #queue: Queued[] = [];
  #writing = false;

  constructor(write: WriteAttempts, log: AppContext["log"]) {
    this.#write = write;
    this.#log = log;
  }

  /** Resolves once the batch holding this record has been written or given up; never rejects. */
  record(record: AttemptRecord): Promise<void> {
    return new Promise((done) => {
      this.#queue.push({ record, done });
      if (this.#writing) return;
      this.#writing = true;
      // After the current I/O phase: the answers that arrived together are written together.
      setImmediate(() => void this.#writeAll());
    });
  }

  async #writeAll(): Promise<void> {
    while (this.#queue.length > 0) {
      const batch = this.#queue.splice(0);
      try {
        const recorded = await this.#write(batch.map((q) => q.record));
        for (const { record } of batch) {
          if (!recorded.has(record.deliveryId))
            this.#log.warn(
              { deliveryId: record.deliveryId },
              "webhook delivery lease lost; outcome not recorded",
            );
        }
      } catch (err) {
        // The batch's transaction rolled back, so none of its outcomes is recorded: each delivery
        // keeps its lease until the lease runs out, then it is due again and sent again (at least
        // once, never lost).
        this.#log.error(
          { err, deliveryIds: batch.map((q) => q.record.deliveryId) },
          "webhook dispatcher: could not record attempts",
        );
      }
      for (const q of batch) q.done();
    }
    this.#writing = false;
  }
}
