import type { Readable } from "node:stream";
import { badRequest } from "../../domain/errors.ts";
import { PAYOUT_STATUSES, type PayoutStatus } from "../../domain/payout-state.ts";
import { isUuid } from "../../domain/validation.ts";
import { decodeCursor, keysetPage } from "../../platform/db/page.ts";
import type { Tenant } from "../../platform/http/auth.ts";
import { type CsvRecord, csvStream, inBatches, mapRows } from "../../platform/http/csv.ts";
import { networkFilter } from "../networks/directory.ts";
import type { KeyedTransferRow } from "../transfers/list-repo.ts";
import type { TransfersService } from "../transfers/service.ts";
import { type PayoutView, toPayoutView } from "./view.ts";

// A workspace's payouts newest first in keyset pages (the dashboard's list) and in keyset batches
// (the CSV export of D18): every status unless `status` names one (the v1 list shows completed
// ones only). Cursors are the payments list's: created_at to the microsecond and the id.

const PAYOUT_EXPORT_BATCH = 1000;

export interface PayoutFilter {
  status?: PayoutStatus;
  /** The network it moved on (D22). */
  network?: string;
}

/** The filter of query-string parameters; empty is unset, anything not understood a 400 naming it. */
export function parsePayoutFilter(query: Readonly<Record<string, unknown>>): PayoutFilter {
  const filter: PayoutFilter = {};
  const { status, network } = query;
  if (status !== undefined && status !== "") {
    const found = PAYOUT_STATUSES.find((item) => item === status);
    if (!found) throw badRequest(`status must be one of: ${PAYOUT_STATUSES.join(", ")}`);
    filter.status = found;
  }
  const named = networkFilter(network);
  if (named) filter.network = named;
  return filter;
}

/** A payout as listed and exported: its view, and the id and times the view leaves out. */
export type PayoutRecord = PayoutView & { id: string; createdAt: string; completedAt: string | null };

function toRecord(row: KeyedTransferRow): PayoutRecord {
  return {
    id: row.id,
    ...toPayoutView(row),
    createdAt: row.created_at.toISOString(),
    completedAt: row.completed_at?.toISOString() ?? null,
  };
}

const keyOf = (row: KeyedTransferRow) => ({ createdAt: row.key_at, id: row.id });

export async function* payoutsForExport(
  transfers: TransfersService,
  tenant: Tenant,
  filter: PayoutFilter,
): AsyncGenerator<PayoutRecord> {
  const rows = inBatches<KeyedTransferRow>(PAYOUT_EXPORT_BATCH, (last, size) =>
    transfers.listed(tenant, "payout", filter, last ? keyOf(last) : null, size),
  );
  for await (const row of rows) yield toRecord(row);
}

export async function browsePayouts(
  transfers: TransfersService,
  tenant: Tenant,
  filter: PayoutFilter,
  page: { after?: string | undefined; limit: number },
): Promise<{ payouts: PayoutRecord[]; next: string | null }> {
  const after = page.after ? decodeCursor(page.after) : null;
  // One row more than the page says whether another page follows.
  const rows = await transfers.listed(tenant, "payout", filter, after, page.limit + 1);
  const { shown, next } = keysetPage(rows, page.limit, keyOf);
  return { payouts: shown.map(toRecord), next };
}

export async function payoutOf(
  transfers: TransfersService,
  tenant: Tenant,
  id: string,
): Promise<PayoutRecord | undefined> {
  const row = isUuid(id) ? await transfers.listedById(tenant, "payout", id.toLowerCase()) : undefined;
  return row ? toRecord(row) : undefined;
}

export const PAYOUT_CSV_COLUMNS = [
  "id",
  "status",
  "environment",
  "network",
  "tokenSymbol",
  "amount",
  "fromAddress",
  "destinationAddress",
  "txHash",
  "userOpHash",
  "description",
  "metadata",
  "createdAt",
  "completedAt",
] as const;

export function payoutCsvRecord(p: PayoutRecord): CsvRecord {
  return {
    id: p.id,
    status: p.status,
    environment: p.environment,
    network: p.network,
    tokenSymbol: p.tokenSymbol,
    amount: p.amount,
    fromAddress: p.fromAddress,
    destinationAddress: p.destinationAddress,
    txHash: p.txHash,
    userOpHash: p.userOpHash,
    description: p.description,
    metadata: JSON.stringify(p.metadata),
    createdAt: p.createdAt,
    completedAt: p.completedAt,
  } satisfies Record<(typeof PAYOUT_CSV_COLUMNS)[number], string | null | undefined>;
}

/** The CSV download of `payouts` (an export, or none at all: the header row alone). */
export function payoutsCsv(payouts: AsyncIterable<PayoutRecord> | Iterable<PayoutRecord>): Readable {
  return csvStream(PAYOUT_CSV_COLUMNS, mapRows(payouts, payoutCsvRecord));
}
