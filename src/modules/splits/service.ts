import { randomUUID } from "node:crypto";
import type { AppContext } from "../../context.ts";
import { badRequest } from "../../domain/errors.ts";
import { ownWalletProblem } from "../../domain/own-wallets.ts";
import {
  checkSplitConfig,
  replaceSplits,
  type SplitShare,
  type StoredSplit,
  snapshotOf,
} from "../../domain/splits.ts";
import { coalescedLookup } from "../../platform/db/coalesced-lookup.ts";
import type { Tenant } from "../../platform/http/auth.ts";
import type { WorkspacesService } from "../workspaces/service.ts";
import * as repo from "./repo.ts";

// Splits configuration (D15): GET and PUT /api/v1/splits per workspace and environment, and the
// snapshot a new payment keeps. Validation is all-or-nothing: a refused body changes nothing.

export interface SplitsView {
  enabled: boolean;
  splits: StoredSplit[];
}

export class SplitsService {
  readonly #ctx: AppContext;
  readonly #config: (key: string) => Promise<repo.SplitConfig | undefined>;
  readonly #workspaces: Pick<WorkspacesService, "profile">;

  constructor(ctx: AppContext, workspaces: Pick<WorkspacesService, "profile">) {
    this.#ctx = ctx;
    this.#workspaces = workspaces;
    // Payment creations that arrive together read their configurations in one query.
    this.#config = coalescedLookup((keys: readonly string[]) => repo.readConfigs(ctx.db, keys));
  }

  async get(tenant: Tenant): Promise<SplitsView> {
    const config = await repo.readConfig(this.#ctx.db, tenant);
    return { enabled: config?.enabled ?? false, splits: config?.splits ?? [] };
  }

  /** Replaces the whole configuration; labels configured before keep their ids. */
  async put(tenant: Tenant, body: unknown): Promise<SplitsView> {
    const checked = checkSplitConfig(body);
    if (!checked.ok) throw badRequest(checked.message);
    const { eoaAddress, smartWalletAddress } = await this.#workspaces.profile(tenant.workspaceId);
    for (const [i, split] of checked.value.splits.entries()) {
      const problem = ownWalletProblem(`splits[${i}].destination`, split.destination, [
        eoaAddress,
        smartWalletAddress,
      ]);
      if (problem) throw badRequest(problem);
    }
    const now = this.#ctx.now();
    return this.#ctx.db.transaction().execute(async (trx) => {
      const before = await repo.lockConfig(trx, tenant, now);
      const splits = replaceSplits(before.splits, checked.value.splits, randomUUID, now);
      await repo.writeConfig(trx, tenant, { enabled: checked.value.enabled, splits, updatedAt: now });
      return { enabled: checked.value.enabled, splits };
    });
  }

  /** The enabled splits a crypto payment created now keeps; null when splits are off (D15). */
  async snapshot(scope: repo.ConfigScope): Promise<SplitShare[] | null> {
    return snapshotOf(await this.#config(`${scope.workspaceId} ${scope.environment}`));
  }
}
