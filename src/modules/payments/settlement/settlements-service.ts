import type { AppContext } from "../../../context.ts";
import { notFound } from "../../../domain/errors.ts";
import { isUuid } from "../../../domain/validation.ts";
import type { PaymentRow } from "../../../platform/db/schema.ts";
import type { Tenant } from "../../../platform/http/auth.ts";
import { visibleTo } from "../repo.ts";
import { type SettlementView, toSettlementView } from "./settlement-record.ts";
import * as settlementRepo from "./settlement-repo.ts";

// GET /api/v1/settlements and /{id} (D15): the settlement of each crypto payment once it ended
// (forwarded or failed), with the data of its settlement.recorded event and when it was recorded.
// Recorded for every crypto payment; the events only for those whose snapshot had splits.

export type SettlementAnswer = SettlementView & { createdAt: string };

function toAnswer(row: PaymentRow): SettlementAnswer {
  return { ...toSettlementView(row), createdAt: (row.settled_at ?? row.updated_at).toISOString() };
}

export class SettlementsService {
  readonly #ctx: AppContext;

  constructor(ctx: AppContext) {
    this.#ctx = ctx;
  }

  async list(
    tenant: Tenant,
    query: { paymentId?: string | undefined; limit: number; offset: number },
  ): Promise<{ settlements: SettlementAnswer[]; total: number }> {
    // A payment id that is no uuid names no payment: an empty page, as for an unknown one.
    if (query.paymentId !== undefined && !isUuid(query.paymentId)) return { settlements: [], total: 0 };
    const { rows, total } = await settlementRepo.listSettled(this.#ctx.db, {
      workspaceId: tenant.workspaceId,
      environment: tenant.environment,
      paymentId: query.paymentId,
      limit: query.limit,
      offset: query.offset,
    });
    return { settlements: rows.map(toAnswer), total };
  }

  async get(tenant: Tenant, settlementId: string): Promise<SettlementAnswer> {
    const row = isUuid(settlementId)
      ? await settlementRepo.findSettled(this.#ctx.db, settlementId)
      : undefined;
    const visible = visibleTo(row, tenant);
    if (!visible) throw notFound("Settlement not found");
    return toAnswer(visible);
  }
}
