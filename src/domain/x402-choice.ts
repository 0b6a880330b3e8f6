import { PaymentRequiredV2Schema, PaymentRequirementsV2Schema, z } from "@x402/core/schemas";
import type { Network, PaymentRequired, PaymentRequirements } from "@x402/core/types";
import { InvalidRequest } from "./errors.ts";
import { type ChainToken, isWalletCurrency, type WalletCurrency } from "./money.ts";
import { isAddress, isPlainObject, isZeroAddress, MAX_AMOUNT_UNITS } from "./validation.ts";

// Which of a server's x402 payment requirements (its 402 answer's `accepts`) an agent wallet pays
// (D23, issue 40): the first the wallet can sign with the `exact` scheme as an EIP-3009
// authorization, on a network of the key's environment, in a token the wallet holds. The shape of
// a PaymentRequired is checked by @x402/core's own schema; what is left here is our choice.

/** The longest validity an authorization may be signed for (its requirement's maxTimeoutSeconds). */
export const MAX_TIMEOUT_SECONDS = 86_400;

/**
 * @x402/core's schema, keeping what a requirement carries beyond the fields it names: the payload's
 * `accepted` repeats the requirement, and a server may compare the two whole.
 */
const PaymentRequiredSchema = PaymentRequiredV2Schema.extend({
  accepts: z.array(PaymentRequirementsV2Schema.passthrough()).min(1),
});

/** A network of the environment as the choice needs it (NetworkDirectory's listing). */
export interface PayableNetwork {
  id: string;
  caip2: string;
  tokens: ReadonlyArray<{ symbol: ChainToken; address: string | null }>;
}

export interface ChosenRequirement {
  /** The requirement as the server sent it: what the payload's `accepted` must repeat. */
  requirement: PaymentRequirements;
  /** Our network id (D22) and its CAIP-2 name. */
  network: string;
  caip2: string;
  currency: WalletCurrency;
  /** In the token's smallest unit. */
  amount: bigint;
  payTo: string;
}

/**
 * A PaymentRequired object (x402 v2), checked with @x402/core's schema; 400 naming
 * `paymentRequired` and the part of it that is wrong.
 */
export function parsePaymentRequired(value: unknown): PaymentRequired {
  if (!isPlainObject(value))
    throw new InvalidRequest(
      "paymentRequired must be an x402 PaymentRequired object or its base64 header value",
    );
  if (value.x402Version !== 2)
    throw new InvalidRequest("paymentRequired.x402Version must be 2 (x402 v2; v1 is not supported)");
  const parsed = PaymentRequiredSchema.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const path = issue ? issue.path.map((part) => (typeof part === "number" ? `[${part}]` : `.${part}`)) : [];
    throw new InvalidRequest(
      `paymentRequired${path.join("")} is invalid: ${issue?.message ?? "not a PaymentRequired"}`,
    );
  }
  const { resource, accepts, extensions } = parsed.data;
  return {
    x402Version: 2,
    resource,
    accepts: accepts.map((r) => ({ ...r, network: caip2Of(r.network), extra: r.extra ?? {} })),
    ...(extensions ? { extensions } : {}),
  };
}

/** A network name the schema checked has a colon, as the CAIP-2 type: `<namespace>:<reference>`. */
function caip2Of(network: string): Network {
  const colon = network.indexOf(":");
  return `${network.slice(0, colon)}:${network.slice(colon + 1)}`;
}

/**
 * The first requirement of `paymentRequired.accepts` the wallet can pay (see the file's comment),
 * else 400 with the reason each was passed over (`rejected: [{index, reason}]`).
 */
export function chooseRequirement(
  paymentRequired: PaymentRequired,
  networks: readonly PayableNetwork[],
  walletCurrencies: readonly string[],
): ChosenRequirement {
  const rejected: Array<{ index: number; reason: string }> = [];
  for (const [index, requirement] of paymentRequired.accepts.entries()) {
    const fit = fitOf(requirement, networks, walletCurrencies);
    if (typeof fit !== "string") return fit;
    rejected.push({ index, reason: fit });
  }
  const offered = networks.map((n) => n.caip2).join(", ") || "none";
  throw new InvalidRequest(
    `paymentRequired.accepts has no requirement this wallet can pay: it needs scheme exact (EIP-3009) on a network of this environment (${offered}) in a token the wallet holds (${walletCurrencies.join(", ")})`,
    { rejected },
  );
}

/** The requirement as a choice, or why it is passed over. */
function fitOf(
  requirement: PaymentRequirements,
  networks: readonly PayableNetwork[],
  walletCurrencies: readonly string[],
): ChosenRequirement | string {
  if (requirement.scheme !== "exact")
    return `scheme ${requirement.scheme.slice(0, 40)} is not supported (only exact)`;
  const network = networks.find((n) => n.caip2 === requirement.network);
  if (!network) return `network ${requirement.network.slice(0, 80)} is not a network of this environment`;
  const token = network.tokens.find(
    (t) => t.address !== null && t.address.toLowerCase() === requirement.asset.toLowerCase(),
  );
  if (!token) return `asset ${requirement.asset.slice(0, 80)} is not a token of ${network.id}`;
  const currency = token.symbol;
  if (!isWalletCurrency(currency) || !walletCurrencies.includes(currency))
    return `the wallet does not hold ${currency}`;
  const extra = requirement.extra;
  const method = extra.assetTransferMethod;
  if (method !== undefined && method !== "eip3009")
    return `assetTransferMethod ${String(method).slice(0, 40)} is not supported (only eip3009)`;
  const flow = extra.paymentFlow;
  if (flow !== undefined && flow !== null && flow !== "authorization")
    return `paymentFlow ${String(flow).slice(0, 40)} is not supported (only authorization)`;
  if (typeof extra.name !== "string" || typeof extra.version !== "string" || !extra.name || !extra.version)
    return "extra.name and extra.version (the token's EIP-712 domain) are required";
  if (!/^[0-9]{1,78}$/.test(requirement.amount))
    return "amount must be an integer of the token's smallest unit";
  const amount = BigInt(requirement.amount);
  if (amount === 0n || amount > MAX_AMOUNT_UNITS) return "amount must be above zero and fit a uint256";
  if (!isAddress(requirement.payTo) || isZeroAddress(requirement.payTo))
    return "payTo must be an address (0x and 40 hex digits, not the zero address)";
  const timeout = requirement.maxTimeoutSeconds;
  if (!Number.isInteger(timeout) || timeout < 1 || timeout > MAX_TIMEOUT_SECONDS)
    return `maxTimeoutSeconds must be a whole number of seconds from 1 to ${MAX_TIMEOUT_SECONDS}`;
  return {
    requirement,
    network: network.id,
    caip2: network.caip2,
    currency,
    amount,
    payTo: requirement.payTo,
  };
}
