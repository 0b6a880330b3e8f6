import { isOwnWallet } from "./own-wallets.ts";

// The rules of the x402 facilitator (D23) that need no I/O: what a settle request must name before
// the x402 packages check its signature and the chain, and what an x402 payment is.

/** The purpose the facilitator's transactions are recorded with (chain_transactions). */
export const X402_SETTLEMENT_PURPOSE = "x402_settlement";

/** The x402 protocol version this facilitator speaks. */
export const X402_VERSION = 2;

/**
 * The schemes settled here, and how a payer signs for each: `exact`, EIP-3009's
 * `transferWithAuthorization` of the whole authorized amount; `upto`, a Permit2 witness transfer
 * through x402's upto proxy of what the resource used, up to what was authorized.
 */
export const X402_SCHEMES = { exact: "eip3009", upto: "permit2" } as const;

export type X402Scheme = keyof typeof X402_SCHEMES;

export function isX402Scheme(scheme: string): scheme is X402Scheme {
  return Object.hasOwn(X402_SCHEMES, scheme);
}

/**
 * How long after its authorization stops being valid an x402 payment still waits for its
 * transaction: a transaction recorded before then may be mined until then, and is watched a while
 * after (a node slow to answer, a watcher catching up); later it expires like any payment.
 */
export const X402_PAYMENT_GRACE_MS = 60 * 60 * 1000;

/**
 * The key a used Permit2 nonce is held under (a settle's claim, the sandbox ledger's record):
 * apart from EIP-3009's 32-byte nonces, and one per payer across tokens, as Permit2 keeps them.
 */
export function permit2NonceKey(nonce: bigint | string): string {
  return `permit2:${nonce}`;
}

/** A network of the environment as the facilitator sees it. */
export interface X402Network {
  /** Our id (D22). */
  id: string;
  /** `eip155:<chainId>`. */
  caip2: string;
  /** The tokens an x402 payment may be made in there, by contract address (any case). */
  tokens: ReadonlyArray<{ symbol: string; address: string }>;
}

/** The parts of a payment requirement the facilitator decides on before anything else. */
export interface RequirementsShape {
  scheme: string;
  network: string;
  asset: string;
  payTo: string;
  amount: string;
}

/** The reasons of the x402 specification this module answers with. */
export type X402Refusal =
  | "unsupported_scheme"
  | "invalid_network"
  | "invalid_payment_requirements"
  | "invalid_payload";

export type RequirementsCheck =
  | { ok: true; scheme: X402Scheme; network: X402Network; token: string; amount: bigint }
  | { ok: false; reason: X402Refusal; message: string };

const AMOUNT = /^[0-9]{1,78}$/;

/**
 * Whether `requirements` name what this workspace can be paid with here: a scheme settled here,
 * signed the scheme's way (`signedAs`: what the payload carries, null for a kind of no scheme's), a
 * network of the environment, one of its tokens, a whole amount (positive, but `upto` may settle
 * nothing used), and one of the workspace's receiving addresses as the payee.
 */
export function checkRequirements(
  requirements: RequirementsShape,
  signedAs: string | null,
  networks: readonly X402Network[],
  receivingAddresses: ReadonlyArray<string | null>,
): RequirementsCheck {
  const { scheme } = requirements;
  if (!isX402Scheme(scheme))
    return refuse(
      "unsupported_scheme",
      `Scheme ${scheme} is not settled here (${Object.keys(X402_SCHEMES).join(", ")})`,
    );
  if (signedAs !== X402_SCHEMES[scheme])
    return refuse(
      "invalid_payload",
      scheme === "exact"
        ? "Only EIP-3009 authorizations are settled here with exact"
        : "upto is settled here with Permit2 authorizations to x402's upto proxy",
    );
  const network = networks.find((n) => n.caip2 === requirements.network);
  if (!network)
    return refuse(
      "invalid_network",
      `Network ${requirements.network} is not one of this environment's (${networks.map((n) => n.caip2).join(", ")})`,
    );
  const token = network.tokens.find((t) => sameAddress(t.address, requirements.asset));
  if (!token)
    return refuse(
      "invalid_payment_requirements",
      `Asset ${requirements.asset} is not a token of ${network.id}`,
    );
  if (!AMOUNT.test(requirements.amount) || (BigInt(requirements.amount) === 0n && scheme !== "upto"))
    return refuse(
      "invalid_payment_requirements",
      "amount must be a positive whole number of the token's units",
    );
  if (!isOwnWallet(requirements.payTo, receivingAddresses))
    return refuse(
      "invalid_payment_requirements",
      "payTo must be one of this workspace's receiving addresses",
    );
  return { ok: true, scheme, network, token: token.symbol, amount: BigInt(requirements.amount) };
}

function refuse(reason: X402Refusal, message: string): RequirementsCheck {
  return { ok: false, reason, message };
}

export function sameAddress(a: string, b: string): boolean {
  return a.toLowerCase() === b.toLowerCase();
}

/** When an x402 payment whose authorization is valid until `validBefore` (unix seconds) expires. */
export function x402PaymentExpiry(validBefore: bigint): Date {
  return new Date(Number(validBefore) * 1000 + X402_PAYMENT_GRACE_MS);
}
