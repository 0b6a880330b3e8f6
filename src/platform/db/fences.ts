import type { CompiledQuery } from "kysely";
import type { Db } from "./database.ts";

// What another module must write with a record it does not own, handed over as data: compiled
// statements the recorder runs first in its own transaction, the way events are handed to the
// webhook outbox. A fence that must take something (claim a key, take an amount, move a row from
// an expected state) is a statement that returns or changes a row when it may; when it returns
// and changes none, the record is refused and its transaction rolled back, and the module that
// wrote the fence finds out why at its own edge, afterwards. No code of that module runs inside
// the recorder's transaction.

export interface Fence {
  /** Names the fence in a refusal (its writer maps the name to its own answer). */
  name: string;
  statement: CompiledQuery;
  /** Refuses the record when the statement returns and changes no row. */
  required: boolean;
}

/** A required fence took nothing: nothing of the record is written. */
export class FenceRefused extends Error {
  override name = "FenceRefused";
  readonly fence: string;

  constructor(fence: string) {
    super(`refused by the fence "${fence}"`);
    this.fence = fence;
  }
}

/** Runs `fences` in order in `trx`; throws FenceRefused at the first required one that took nothing. */
export async function runFences(trx: Db, fences: readonly Fence[]): Promise<void> {
  for (const fence of fences) {
    const result = await trx.executeQuery(fence.statement);
    const touched = result.rows.length > 0 || (result.numAffectedRows ?? 0n) > 0n;
    if (fence.required && !touched) throw new FenceRefused(fence.name);
  }
}
