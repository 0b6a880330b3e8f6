import { ENVIRONMENTS, type Environment } from "../../config.ts";
import type { AppContext } from "../../context.ts";
import { firstLineOf } from "../../domain/errors.ts";
import type { CardProviders } from "../card/provider.ts";
import { applySnapshot } from "./apply.ts";
import type { OnrampInbox } from "./confirm.ts";
import * as repo from "./repo.ts";

// Crash recovery for on-ramp sessions whose provider events were lost (our service down longer
// than the provider retries, a misconfigured endpoint): the `onramp.sessions` job asks the
// provider what such a session is now and applies the answer exactly as an event (apply.ts).
// - Only sessions quiet for QUIET_MS: a fresh one is the customer's, its events on their way.
// - Each one asked is noted first (`reconciled_at`) and not asked again within QUIET_MS or a tenth
//   of its age, whichever is longer (an abandoned session is asked ever less often: about 60
//   times in its week); the least recently asked go first, BATCH a tick, so a provider that cannot
//   answer for some does not keep the others waiting. FAILURES_IN_A_ROW end a tick early.
// - A session made more than HORIZON_MS ago is no longer asked: one the customer abandoned never
//   ends at the provider, and would be asked forever. Its events still apply if they come.
// - A fulfillment_complete read here is recorded like an event's: the credit stays the chain's
//   (confirm.ts), never this job's.

/** A session unchanged for this long may have lost its events; it is asked at most this often. */
export const QUIET_MS = 10 * 60_000;
/** Sessions made longer ago than this are no longer asked. */
export const HORIZON_MS = 7 * 24 * 60 * 60_000;
const BATCH = 50;
/** Provider failures in a row that end a tick early. */
const FAILURES_IN_A_ROW = 3;

/** One tick: asks about the sessions due and applies the answers; how many changed. */
export async function reconcileSessions(
  ctx: AppContext,
  providers: CardProviders,
  inbox: OnrampInbox,
): Promise<number> {
  const environments = ENVIRONMENTS.filter((environment) => providers[environment]);
  const now = ctx.now();
  const due = await repo.toReconcile(
    ctx.db,
    environments,
    { now, quietSince: new Date(now.getTime() - QUIET_MS), madeSince: new Date(now.getTime() - HORIZON_MS) },
    BATCH,
  );
  let changed = 0;
  let failedInARow = 0;
  for (const [i, row] of due.entries()) {
    try {
      if (await reconcileOne(ctx, providers, inbox, row)) changed++;
      failedInARow = 0;
    } catch (err) {
      // One session the provider cannot answer for does not stop the others; it is asked again later.
      ctx.log.error(
        { err, onrampId: row.id, providerSessionId: row.provider_session_id },
        `reconciling an on-ramp session with the card provider failed: ${firstLineOf(err)}`,
      );
      // Several in a row: the provider is down, not one session's trouble. The rest wait for the
      // next tick rather than each spending the client's timeout and retries now.
      if (++failedInARow === FAILURES_IN_A_ROW && i < due.length - 1) {
        ctx.log.error(
          { failed: failedInARow, left: due.length - 1 - i },
          "the card provider failed for several on-ramp sessions in a row: the rest wait for the next tick",
        );
        break;
      }
    }
  }
  return changed;
}

async function reconcileOne(
  ctx: AppContext,
  providers: CardProviders,
  inbox: OnrampInbox,
  row: repo.OnrampRow,
): Promise<boolean> {
  const environment = row.environment as Environment;
  const provider = providers[environment];
  if (!provider) return false;
  await repo.markReconciled(ctx.db, row.id, ctx.now());
  const session = await provider.retrieveOnrampSession(row.provider_session_id);
  // Applied by the id the answer names: it must be the session asked about.
  if (session.id !== row.provider_session_id)
    throw new Error(`the provider answered session ${session.id} for ${row.provider_session_id}`);
  const applied = await ctx.db
    .transaction()
    .execute((trx) => applySnapshot(ctx, inbox, trx, environment, session, { reconciled: true }));
  if (applied.changed)
    // Worth an operator's look: the provider's events for this session did not reach us.
    ctx.log.warn(
      { onrampId: row.id, status: session.status, outcome: applied.outcome },
      "on-ramp session brought up to date from the card provider: its events were not received",
    );
  return applied.changed;
}
