import { InvalidRequest } from "../../domain/errors.ts";
import { type PaymentFilter, parsePaymentFilter } from "../payments/browse.ts";
import type { FilterValues } from "./views/payments.ts";

// The payments list form → the filter of the API's list and export (payments/browse.ts). The
// form's dates are days, its "to" day included; the API's createdTo is an exclusive instant.

const FIELDS = ["status", "tokenSymbol", "paymentMethod", "network", "from", "to", "search"] as const;
const DAY = /^\d{4}-\d{2}-\d{2}$/;

export type FormOutcome =
  | { ok: true; values: FilterValues; filter: PaymentFilter; query: string }
  | { ok: false; values: FilterValues; error: { field: string; message: string } };

export function readFilterForm(query: Readonly<Record<string, unknown>>): FormOutcome {
  const values: FilterValues = {};
  for (const field of FIELDS) {
    const value = query[field];
    if (typeof value === "string" && value !== "") values[field] = value;
    else if (value !== undefined && value !== "")
      return { ok: false, values, error: { field, message: `${field} must be given once` } };
  }
  for (const field of ["from", "to"] as const) {
    const value = values[field];
    if (value !== undefined && !DAY.test(value))
      return { ok: false, values, error: { field, message: "Enter a date as YYYY-MM-DD" } };
  }
  const api = new URLSearchParams();
  if (values.status) api.set("status", values.status);
  if (values.tokenSymbol) api.set("tokenSymbol", values.tokenSymbol);
  if (values.paymentMethod) api.set("paymentMethod", values.paymentMethod);
  if (values.network) api.set("network", values.network);
  if (values.from) api.set("createdFrom", values.from);
  if (values.to) {
    const next = new Date(`${values.to}T00:00:00Z`);
    if (Number.isNaN(next.getTime()))
      return { ok: false, values, error: { field: "to", message: "Enter a date as YYYY-MM-DD" } };
    next.setUTCDate(next.getUTCDate() + 1);
    api.set("createdTo", next.toISOString().slice(0, 10));
  }
  if (values.search) api.set("search", values.search);
  try {
    const filter = parsePaymentFilter(Object.fromEntries(api));
    return { ok: true, values, filter, query: formQuery(values) };
  } catch (err) {
    if (!(err instanceof InvalidRequest)) throw err;
    const field = err.message.startsWith("createdFrom")
      ? "from"
      : err.message.startsWith("createdTo")
        ? "to"
        : (FIELDS.find((f) => err.message.startsWith(f)) ?? "form");
    const message =
      field === "to" && err.message.includes("later")
        ? "The end date must not be before the start date"
        : err.message;
    return { ok: false, values, error: { field, message } };
  }
}

/** The form's own query string (for the next page's link and the CSV link). */
export function formQuery(values: FilterValues): string {
  const params = new URLSearchParams();
  for (const field of FIELDS) {
    const value = values[field];
    if (value) params.set(field, value);
  }
  return params.toString();
}
