import { isAddress, isPlainObject, isZeroAddress, zeroAddressMessage } from "./validation.ts";

// Splits (D15): the configuration's rules and the arithmetic of carving a settlement. A split is
// a share of a crypto payment's net (after the fee) in basis points; each split gets
// floor(net × percentBps / 10000) smallest units and the merchant the rest, so the parts always
// sum to the net and the rounding dust is the merchant's.

export const MAX_SPLITS = 10;
export const MAX_LABEL = 100;
/** 100% in basis points: the enabled splits may take at most the whole net. */
export const WHOLE_BPS = 10_000;

/** A configured split as stored (and shown by GET /api/v1/splits). */
export interface StoredSplit {
  id: string;
  label: string;
  percentBps: number;
  /** Lower case. */
  destination: string;
  enabled: boolean;
  createdAt: string;
}

/** A split as a payment's snapshot keeps it: only enabled ones, in the configuration's order. */
export interface SplitShare {
  splitId: string;
  label: string;
  percentBps: number;
  destination: string;
}

/** A split's part of one settlement, as recorded with the settlement's outcome. */
export interface SettledSplit extends SplitShare {
  /** Smallest units, as a decimal string (JSON has no bigint). */
  amount: string;
  status: "sent" | "failed";
  /** The transaction that carried it; null when nothing was sent (an amount of 0, or a failure). */
  txRef: string | null;
}

/** A settlement as recorded on its payment when it ends (forwarded or failed). */
export interface SettlementRecord {
  /** The merchant's part in smallest units (the net less every split). */
  merchantAmount: string;
  /** The transaction that carried the merchant's part; null when none did. */
  txRef: string | null;
  splits: SettledSplit[];
}

export interface SplitInput {
  label: string;
  percentBps: number;
  destination: string;
  enabled: boolean;
}

export interface SplitConfigInput {
  enabled: boolean;
  splits: SplitInput[];
}

export type Checked<T> = { ok: true; value: T } | { ok: false; message: string };

const SPLIT_FIELDS = new Set(["label", "percentBps", "destination", "enabled"]);

/** The body of PUT /api/v1/splits, checked against every rule of D15; the message names the field. */
export function checkSplitConfig(body: unknown): Checked<SplitConfigInput> {
  if (!isPlainObject(body)) return fail("body must be a JSON object with enabled and splits");
  for (const field of Object.keys(body)) {
    if (field !== "enabled" && field !== "splits")
      return fail(`${field} is not a field of the splits configuration`);
  }
  if (typeof body.enabled !== "boolean") return fail("enabled is required and must be true or false");
  if (!Array.isArray(body.splits)) return fail("splits is required and must be an array");
  if (body.splits.length > MAX_SPLITS) return fail(`splits may hold at most ${MAX_SPLITS} splits`);
  const splits: SplitInput[] = [];
  const labels = new Set<string>();
  for (const [i, item] of body.splits.entries()) {
    const at = `splits[${i}]`;
    if (!isPlainObject(item)) return fail(`${at} must be an object with label, percentBps and destination`);
    for (const field of Object.keys(item)) {
      if (!SPLIT_FIELDS.has(field)) return fail(`${at}.${field} is not a field of a split`);
    }
    const { label, percentBps, destination, enabled = true } = item;
    if (typeof label !== "string" || label.trim().length === 0 || label.length > MAX_LABEL)
      return fail(`${at}.label is required and must be 1 to ${MAX_LABEL} characters`);
    if (labels.has(label)) return fail(`${at}.label must be unique: "${label}" is used twice`);
    labels.add(label);
    if (
      typeof percentBps !== "number" ||
      !Number.isInteger(percentBps) ||
      percentBps < 1 ||
      percentBps > WHOLE_BPS
    )
      return fail(`${at}.percentBps is required and must be an integer from 1 to ${WHOLE_BPS}`);
    if (!isAddress(destination)) return fail(`${at}.destination must be an address: 0x and 40 hex digits`);
    if (isZeroAddress(destination)) return fail(zeroAddressMessage(`${at}.destination`));
    if (typeof enabled !== "boolean") return fail(`${at}.enabled must be true or false`);
    splits.push({ label, percentBps, destination: destination.toLowerCase(), enabled });
  }
  const total = splits.filter((s) => s.enabled).reduce((sum, s) => sum + s.percentBps, 0);
  if (total > WHOLE_BPS)
    return fail(`splits: the enabled splits' percentBps sum to ${total}, more than ${WHOLE_BPS}`);
  return { ok: true, value: { enabled: body.enabled, splits } };
}

function fail(message: string): { ok: false; message: string } {
  return { ok: false, message };
}

/**
 * The stored configuration that replaces `existing`: a split whose label was configured before
 * keeps its id and creation time (D15), a new label gets a new id.
 */
export function replaceSplits(
  existing: readonly StoredSplit[],
  input: readonly SplitInput[],
  newId: () => string,
  now: Date,
): StoredSplit[] {
  const byLabel = new Map(existing.map((split) => [split.label, split]));
  return input.map((split) => {
    const before = byLabel.get(split.label);
    return {
      id: before?.id ?? newId(),
      label: split.label,
      percentBps: split.percentBps,
      destination: split.destination,
      enabled: split.enabled,
      createdAt: before?.createdAt ?? now.toISOString(),
    };
  });
}

/** What a payment created now keeps (D15): the enabled splits, or null when splits are off. */
export function snapshotOf(
  config: { enabled: boolean; splits: readonly StoredSplit[] } | undefined,
): SplitShare[] | null {
  if (!config?.enabled) return null;
  return config.splits
    .filter((split) => split.enabled)
    .map((split) => ({
      splitId: split.id,
      label: split.label,
      percentBps: split.percentBps,
      destination: split.destination,
    }));
}

export interface Carved {
  /** What the merchant receives: the net less every split (the rounding dust included). */
  merchant: bigint;
  /** Each share's amount, in the order of the shares. */
  amounts: bigint[];
}

/** Carves `net` into the shares' parts and the merchant's rest: the parts sum to `net` exactly. */
export function carve(net: bigint, shares: readonly Pick<SplitShare, "percentBps">[]): Carved {
  if (net < 0n) throw new RangeError("a settlement's net cannot be negative");
  const total = shares.reduce((sum, share) => sum + share.percentBps, 0);
  if (total > WHOLE_BPS) throw new RangeError(`splits take ${total} basis points, more than ${WHOLE_BPS}`);
  const amounts = shares.map((share) => (net * BigInt(share.percentBps)) / BigInt(WHOLE_BPS));
  const merchant = amounts.reduce((rest, amount) => rest - amount, net);
  return { merchant, amounts };
}
