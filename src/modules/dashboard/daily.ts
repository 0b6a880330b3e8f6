import type { Tenant } from "../../platform/http/auth.ts";
import type { PaymentsService } from "../payments/service.ts";
import type { DailyPoint } from "./views/chart.ts";

// The overview's 30 days: one point per UTC day, today included, days without payments as zeros.

export const CHART_DAYS = 30;
const DAY_MS = 86_400_000;

export async function dailyPoints(
  payments: PaymentsService,
  tenant: Tenant,
  now: Date,
): Promise<DailyPoint[]> {
  const today = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate());
  const first = today - (CHART_DAYS - 1) * DAY_MS;
  const rows = await payments.daily(tenant, new Date(first));
  const points = new Map<string, DailyPoint>();
  for (let day = first; day <= today; day += DAY_MS) {
    const key = new Date(day).toISOString().slice(0, 10);
    points.set(key, { day: key, count: 0, volumes: {} });
  }
  for (const row of rows) {
    const point = points.get(row.day);
    if (!point) continue;
    point.count += row.count;
    if (row.paidUnits > 0n) point.volumes[row.tokenSymbol] = { text: row.paid, value: Number(row.paid) };
  }
  return [...points.values()];
}
