import { MAX_SPLITS, type StoredSplit } from "../../domain/splits.ts";
import { field } from "./page-kit.ts";

// The splits form of the dashboard (D15) as typed, and what it sends to SplitsService.put. Shares
// are typed as a percent of the net with at most 2 decimals and converted exactly, as text, to
// basis points (12.5 → 1250): no floating point anywhere. Rows whose label, percent and
// destination are all blank, and rows marked "Remove", are left out, so rows are added and
// removed without JavaScript.

/** Blank rows shown after the configured ones (never more than MAX_SPLITS rows in all). */
export const BLANK_ROWS = 3;

export interface SplitRow {
  label: string;
  percent: string;
  destination: string;
  enabled: boolean;
  remove: boolean;
}

export type RowField = "label" | "percent" | "destination" | "enabled";

export interface SplitsFormValues {
  enabled: boolean;
  rows: SplitRow[];
  /** The refusal: the message, and the row (0-based, as shown) and field it is about when known. */
  error?: { message: string; row?: number | undefined; field?: RowField | undefined } | undefined;
}

const PERCENT = /^(\d{1,3})(?:\.(\d{1,2}))?$/;

/** "12.5" → 1250; null when not a number with at most 2 decimals (the range is the service's). */
export function percentToBps(text: string): number | null {
  const match = PERCENT.exec(text.trim().replace(/\s*%$/, ""));
  if (!match) return null;
  const whole = match[1] ?? "0";
  const cents = (match[2] ?? "").padEnd(2, "0");
  return Number(whole) * 100 + Number(cents);
}

/** 1250 → "12.5", 1 → "0.01", 10000 → "100": exact, trailing zeros dropped. */
export function bpsToPercent(bps: number): string {
  const whole = Math.trunc(bps / 100);
  const cents = String(bps % 100)
    .padStart(2, "0")
    .replace(/0+$/, "");
  return cents ? `${whole}.${cents}` : String(whole);
}

const blank = (): SplitRow => ({ label: "", percent: "", destination: "", enabled: true, remove: false });

/** The saved configuration as the form shows it: its rows, then a few blank ones. */
export function formOf(config: { enabled: boolean; splits: readonly StoredSplit[] }): SplitsFormValues {
  const rows: SplitRow[] = config.splits.map((s) => ({
    label: s.label,
    percent: bpsToPercent(s.percentBps),
    destination: s.destination,
    enabled: s.enabled,
    remove: false,
  }));
  const extra = Math.min(BLANK_ROWS, MAX_SPLITS - rows.length);
  for (let i = 0; i < extra; i++) rows.push(blank());
  return { enabled: config.enabled, rows };
}

/** The form's fields as typed (`rows` says how many rows it had; never more than MAX_SPLITS). */
export function readSplitsForm(body: unknown): SplitsFormValues {
  const count = Number.parseInt(field(body, "rows") ?? "", 10);
  const rows: SplitRow[] = [];
  const n = Number.isInteger(count) ? Math.min(Math.max(count, 0), MAX_SPLITS) : MAX_SPLITS;
  for (let i = 0; i < n; i++) {
    rows.push({
      label: field(body, `label-${i}`) ?? "",
      percent: field(body, `percent-${i}`) ?? "",
      destination: field(body, `destination-${i}`) ?? "",
      enabled: field(body, `enabled-${i}`) === "on",
      remove: field(body, `remove-${i}`) === "on",
    });
  }
  return { enabled: field(body, "enabled") === "on", rows };
}

const isBlank = (row: SplitRow) =>
  row.label.trim() === "" && row.percent.trim() === "" && row.destination.trim() === "";

export type SplitsRequest =
  | {
      ok: true;
      body: {
        enabled: boolean;
        splits: Array<{ label: string; percentBps: number; destination: string; enabled: boolean }>;
      };
      /** The row (as shown) of each split sent, to put the service's refusal next to it. */
      rowOf: number[];
    }
  | { ok: false; error: NonNullable<SplitsFormValues["error"]> };

/** The body of SplitsService.put, or the first percent that is not one. */
export function toRequest(form: SplitsFormValues): SplitsRequest {
  const splits: Array<{ label: string; percentBps: number; destination: string; enabled: boolean }> = [];
  const rowOf: number[] = [];
  for (const [i, row] of form.rows.entries()) {
    if (row.remove || isBlank(row)) continue;
    const percentBps = percentToBps(row.percent);
    if (percentBps === null)
      return {
        ok: false,
        error: {
          message: `Split ${i + 1}: the percent must be a number from 0.01 to 100 with at most 2 decimals (12.5 means 12.5% = 1250 basis points)`,
          row: i,
          field: "percent",
        },
      };
    splits.push({ label: row.label, percentBps, destination: row.destination.trim(), enabled: row.enabled });
    rowOf.push(i);
  }
  return { ok: true, body: { enabled: form.enabled, splits }, rowOf };
}

const FIELDS = new Map<string, RowField>([
  ["label", "label"],
  ["percentBps", "percent"],
  ["destination", "destination"],
  ["enabled", "enabled"],
]);

/** The service's refusal ("splits[1].percentBps is …") next to the row and field it names. */
export function refusalOf(message: string, rowOf: readonly number[]): NonNullable<SplitsFormValues["error"]> {
  const match = /^splits\[(\d+)\]\.(\w+)/.exec(message);
  const row = match ? rowOf[Number(match[1])] : undefined;
  if (row === undefined) return { message };
  return { message: `Split ${row + 1}: ${message}`, row, field: FIELDS.get(match?.[2] ?? "") };
}

/** The share the enabled splits take, as a percent ("12.5"), when splits are on. */
export function enabledShare(splits: readonly StoredSplit[]): string {
  return bpsToPercent(splits.filter((s) => s.enabled).reduce((sum, s) => sum + s.percentBps, 0));
}
