import type { Answer } from "./api.ts";
import { PaymentsError } from "./errors.ts";

// Verifying a webhook delivery (docs/webhooks.md, D24): the Standard Webhooks signature
// (`webhook-id`, `webhook-timestamp`, `webhook-signature: v1,<base64>` — one or, during a secret
// rotation, two of them) and the service's own timestamped one (`X-Service-Timestamp`,
// `X-Service-Signature-V2: v1=<hex>`). A delivery is genuine when one of them verifies with the
// endpoint's secret and its timestamp is within the tolerance (replays and clock games are
// refused). Web Crypto only, so it runs in Node.js 20+, Deno, Bun, workers and browsers.

/** Bytes Web Crypto takes (backed by an ArrayBuffer, not a shared one). */
type Bytes = Uint8Array<ArrayBuffer>;

type PaymentView = Answer<"/api/v1/payments/{id}", "get">["payment"];
type AgentPaymentView = Answer<
  "/api/wallets/{walletId}/x402/authorizations/{authorizationId}",
  "get"
>["data"];

/** payout.completed and payout.failed (docs/webhooks.md). */
export interface PayoutEventData {
  txHash: string | null;
  amount: string;
  tokenSymbol: string;
  destinationAddress: string;
  fromAddress: string;
  environment: "sandbox" | "live";
  status: string;
  description: string | null;
  metadata: Record<string, string> | null;
  /** payout.failed only. */
  error?: string;
  failStreak?: number;
}

type PaymentEvents =
  | "payment.created"
  | "payment.detected"
  | "payment.confirmed"
  | "payment.forwarded"
  | "payment.failed"
  | "payment.expired"
  | "payment.cancelled";
type AgentPaymentEvents =
  | "agent.payment.authorized"
  | "agent.payment.approval_required"
  | "agent.payment.settled"
  | "agent.payment.expired";
/** Kinds whose `data` this SDK does not describe field by field (docs/webhooks.md does). */
type OtherEvents =
  | "settlement.recorded"
  | "split.recorded"
  | "refund.completed"
  | "refund.failed"
  | "swap.completed"
  | "swap.failed"
  | "onramp.session.updated"
  | "onramp.completed"
  | "agent.created"
  | "agent.updated"
  | "agent.deleted"
  | "wallet.created"
  | "wallet.balance.updated"
  | "wallet.currency.added";

/** Every kind of event the service delivers, discriminated by `event`. */
export type WebhookEvent =
  | { event: PaymentEvents; data: PaymentView }
  | { id: string; event: "payout.completed" | "payout.failed"; data: PayoutEventData; timestamp: string }
  | { event: AgentPaymentEvents; data: AgentPaymentView }
  | { event: "webhook.test"; data: { webhookId: string; message: string; createdAt: string } }
  | { event: OtherEvents; data: Record<string, unknown> };

export type WebhookVerificationReason =
  | "no_signature"
  | "bad_signature"
  | "stale_timestamp"
  | "future_timestamp"
  | "bad_body";

export class WebhookVerificationError extends PaymentsError {
  override name = "WebhookVerificationError";
  readonly reason: WebhookVerificationReason;
  constructor(reason: WebhookVerificationReason, message: string) {
    super(message);
    this.reason = reason;
  }
}

export type WebhookHeaders = Headers | Record<string, string | readonly string[] | undefined>;

export interface VerifyOptions {
  /** How far from now a delivery's timestamp may be, either way (default 300 s). */
  toleranceSeconds?: number;
  /** "Now", in unix seconds (tests). */
  now?: number;
}

/**
 * The event of a genuine delivery, else a WebhookVerificationError. `rawBody` must be the bytes
 * received (Express: `express.raw({type: "application/json"})`; Fastify: a raw-body content
 * parser; Node's http: the concatenated chunks), never re-serialized JSON.
 */
export async function verifyWebhook(
  rawBody: string | Uint8Array,
  headers: WebhookHeaders,
  secret: string,
  options: VerifyOptions = {},
): Promise<WebhookEvent> {
  const body = typeof rawBody === "string" ? encode(rawBody) : new Uint8Array(rawBody);
  const tolerance = options.toleranceSeconds ?? 300;
  const now = options.now ?? Math.floor(Date.now() / 1000);
  const header = (name: string) => headerOf(headers, name);

  const checks: Array<{ timestamp: string; verify: () => Promise<boolean> }> = [];
  const id = header("webhook-id");
  const stdTimestamp = header("webhook-timestamp");
  const stdSignatures = header("webhook-signature");
  if (id && stdTimestamp && stdSignatures)
    checks.push({
      timestamp: stdTimestamp,
      verify: () => verifyStandard(secret, `${id}.${stdTimestamp}.`, body, stdSignatures),
    });
  const ourTimestamp = header("x-service-timestamp");
  const ours = header("x-service-signature-v2");
  if (ourTimestamp && ours)
    checks.push({
      timestamp: ourTimestamp,
      verify: () => verifyOurs(secret, `${ourTimestamp}.`, body, ours),
    });
  if (checks.length === 0)
    throw new WebhookVerificationError("no_signature", "The delivery carries no signature headers");

  for (const check of checks) {
    const at = Number(check.timestamp);
    if (!Number.isInteger(at))
      throw new WebhookVerificationError("bad_signature", "The timestamp is not a number");
    if (at < now - tolerance)
      throw new WebhookVerificationError("stale_timestamp", `The delivery is older than ${tolerance} s`);
    if (at > now + tolerance)
      throw new WebhookVerificationError(
        "future_timestamp",
        `The delivery is dated over ${tolerance} s ahead`,
      );
  }
  const verdicts = await Promise.all(checks.map((check) => check.verify()));
  if (!verdicts.some(Boolean))
    throw new WebhookVerificationError("bad_signature", "No signature matches this secret and body");

  let parsed: unknown;
  try {
    parsed = JSON.parse(new TextDecoder().decode(body));
  } catch {
    throw new WebhookVerificationError("bad_body", "The body is not JSON");
  }
  if (
    typeof parsed !== "object" ||
    parsed === null ||
    typeof (parsed as { event?: unknown }).event !== "string"
  )
    throw new WebhookVerificationError("bad_body", "The body is not an event");
  return parsed as WebhookEvent;
}

/** Any `v1,<base64>` of the header is HMAC-SHA256 of `{id}.{timestamp}.{body}` under the secret's key. */
async function verifyStandard(secret: string, prefix: string, body: Bytes, header: string) {
  const key = await hmacKey(standardKeyBytes(secret));
  const data = concat(encode(prefix), body);
  for (const entry of header.split(" ")) {
    const [version, signature] = entry.split(",", 2);
    if (version !== "v1" || !signature) continue;
    const bytes = base64Bytes(signature);
    if (bytes && (await crypto.subtle.verify("HMAC", key, bytes, data))) return true;
  }
  return false;
}

/** `v1=<hex>` is HMAC-SHA256 of `{timestamp}.{body}` keyed with the secret's UTF-8 bytes. */
async function verifyOurs(secret: string, prefix: string, body: Bytes, header: string) {
  const hex = header.startsWith("v1=") ? header.slice(3) : "";
  if (!/^[0-9a-f]{64}$/i.test(hex)) return false;
  const signature = new Uint8Array(32);
  for (let i = 0; i < 32; i++) signature[i] = Number.parseInt(hex.slice(i * 2, i * 2 + 2), 16);
  const key = await hmacKey(encode(secret));
  return crypto.subtle.verify("HMAC", key, signature, concat(encode(prefix), body));
}

/**
 * The Standard Webhooks key: the bytes after `whsec_`, base64-decoded. Secrets issued before the
 * service adopted Standard Webhooks are base64url; each is decoded in its own alphabet (D24).
 */
function standardKeyBytes(secret: string): Bytes {
  const bytes = base64Bytes(secret.startsWith("whsec_") ? secret.slice(6) : secret);
  if (!bytes) throw new WebhookVerificationError("bad_signature", "The secret is not a whsec_ secret");
  return bytes;
}

function base64Bytes(text: string): Bytes | null {
  const standard = text.replace(/-/g, "+").replace(/_/g, "/");
  const padded = standard.padEnd(Math.ceil(standard.length / 4) * 4, "=");
  try {
    return Uint8Array.from(atob(padded), (c) => c.charCodeAt(0));
  } catch {
    return null;
  }
}

function hmacKey(bytes: Bytes): Promise<CryptoKey> {
  return crypto.subtle.importKey("raw", bytes, { name: "HMAC", hash: "SHA-256" }, false, ["verify"]);
}

function headerOf(headers: WebhookHeaders, name: string): string | undefined {
  if (typeof Headers !== "undefined" && headers instanceof Headers) return headers.get(name) ?? undefined;
  const record = headers as Record<string, string | readonly string[] | undefined>;
  const value = record[name] ?? Object.entries(record).find(([k]) => k.toLowerCase() === name)?.[1];
  return Array.isArray(value) ? value.join(" ") : (value as string | undefined);
}

function encode(text: string): Bytes {
  return new TextEncoder().encode(text);
}

function concat(a: Bytes, b: Bytes): Bytes {
  const out = new Uint8Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}
