import { randomBytes } from "node:crypto";
import { type AppError, RefundExceeded } from "../../domain/errors.ts";
import { formatAmount, parseAmount, TOKEN_DECIMALS } from "../../domain/money.ts";
import type { PaymentView } from "../payments/view.ts";
import { field } from "./page-kit.ts";

// The refund form of a payment's page and the actions of the unmatched inbox (D19) as typed, and
// what they send to RefundsService / UnmatchedInbox. Each form carries a one-time token drawn when
// it is rendered: the Idempotency-Key of what it asks is derived from it, so a form sent twice (a
// double click, a reload of the POST) refunds or returns once. A page shown again after a refusal
// draws a new one (a refusal recorded nothing, so the next try is a new request).

export type RefundField = "amount" | "destinationAddress" | "walletType" | "reason";

export interface RefundFormValues {
  amount: string;
  destinationAddress: string;
  walletType: string;
  reason: string;
  /** The one-time token of this rendering of the form. */
  formToken: string;
  error?: { message: string; field?: RefundField | undefined } | undefined;
}

export type UnmatchedAction = "attach" | "return" | "keep";

/** A refused action of the inbox: the transfer and form it is about, as typed. */
export interface UnmatchedFormError {
  transferId: string;
  action: UnmatchedAction;
  message: string;
  /** What was typed: the payment id (attach) or the destination (return). */
  typed: string;
}

const FORM_TOKEN = /^[A-Za-z0-9_-]{16,64}$/;

/** A fresh one-time form token. */
export function newFormToken(): string {
  return randomBytes(18).toString("base64url");
}

/** The Idempotency-Key of a form's request, from its one-time token; undefined when it has none. */
export function idempotencyKeyOf(body: unknown, purpose: "refund" | "return"): string | undefined {
  const token = field(body, "formToken");
  return token !== undefined && FORM_TOKEN.test(token) ? `dashboard-${purpose}:${token}` : undefined;
}

/** The message shown when a form comes without its one-time token. */
export const MISSING_FORM_TOKEN =
  "This form is incomplete (its one-time token is missing). Reload the page and try again.";

export function blankRefundForm(): RefundFormValues {
  return { amount: "", destinationAddress: "", walletType: "", reason: "", formToken: newFormToken() };
}

/** The form's fields as typed (a fresh token: the form shown again is a new one). */
export function readRefundForm(body: unknown): RefundFormValues {
  const text = (name: string) => (field(body, name) ?? "").slice(0, 600);
  return {
    amount: text("amount").trim(),
    destinationAddress: text("destinationAddress").trim(),
    walletType: text("walletType"),
    reason: text("reason"),
    formToken: newFormToken(),
  };
}

/** The body of RefundsService.create: blank fields left out (the service's defaults). */
export function refundBody(form: RefundFormValues, paymentMethod: PaymentView["paymentMethod"]) {
  const body: Record<string, string> = {};
  if (form.amount !== "") body.amount = form.amount;
  if (paymentMethod === "crypto") {
    if (form.destinationAddress !== "") body.destinationAddress = form.destinationAddress;
    if (form.walletType !== "") body.walletType = form.walletType;
  }
  if (form.reason.trim() !== "") body.reason = form.reason;
  return body;
}

const DECIMALS: ReadonlyMap<string, number> = new Map(Object.entries(TOKEN_DECIMALS));

/** What the payment has left to refund (what it received, or its gross, less its refunds), or null. */
export function refundableOf(p: PaymentView): string | null {
  const decimals = DECIMALS.get(p.tokenSymbol);
  if (decimals === undefined) return null;
  const received = parseAmount(p.amountReceived ?? p.grossAmount, decimals);
  const refunded = parseAmount(p.refundedAmount, decimals);
  if (received === null || refunded === null) return null;
  const left = received - refunded;
  return formatAmount(left > 0n ? left : 0n, decimals);
}

/** Whether `amount` (as refundableOf gives it) is above zero. */
export function isPositive(amount: string | null): boolean {
  return amount !== null && /[1-9]/.test(amount);
}

/** What a service's refusal tells the merchant: its message, with the figure it names. */
export function refusalMessage(err: AppError, tokenSymbol: string): string {
  const details = err.details;
  const refundable = details.refundable;
  if (err instanceof RefundExceeded && typeof refundable === "string")
    return `${err.message}: at most ${refundable} ${tokenSymbol} is left to refund.`;
  if (err.message === "Idempotency key already used")
    return "This form was already sent with other values. Reload the page to make a new request.";
  if (typeof details.available === "string")
    return `${err.message}: the wallet has ${details.available} ${tokenSymbol} available.`;
  const more = [details.detail, details.action].find((v) => typeof v === "string");
  return typeof more === "string" ? `${err.message}: ${more}` : err.message;
}

/** The field of the form a refusal is about, when it names one. */
export function refusedField(err: AppError): RefundField | undefined {
  if (err instanceof RefundExceeded) return "amount";
  const message = err.message;
  if (message.includes("destinationAddress")) return "destinationAddress";
  if (message.includes("walletType")) return "walletType";
  if (message.startsWith("reason")) return "reason";
  if (/amount/i.test(message) && !message.startsWith("amount cannot be set")) return "amount";
  return undefined;
}
