import { randomBytes } from "node:crypto";
import { Webhook } from "standardwebhooks";

// Webhook signing secrets (D24). Issued as `whsec_` + standard base64 (RFC 4648 §4, padded) of 32
// random bytes, so the stock Standard Webhooks libraries take them as they are. Secrets issued
// before were `whsec_` + unpadded base64url (43 characters): the Standard Webhooks key of one is
// its bytes decoded in that alphabet, handed to the library raw. Our own X-Service-Signature*
// headers keep keying with the whole secret's UTF-8 bytes, whichever the format.

const PREFIX = "whsec_";
const STANDARD_BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/** A new signing secret: `whsec_` + padded standard base64 of 32 random bytes. */
export function newSigningSecret(): string {
  return `${PREFIX}${randomBytes(32).toString("base64")}`;
}

/** The HMAC key bytes of a secret: what follows `whsec_`, decoded in the alphabet it was issued in. */
export function standardKeyBytes(secret: string): Buffer {
  const encoded = secret.startsWith(PREFIX) ? secret.slice(PREFIX.length) : secret;
  return Buffer.from(encoded, STANDARD_BASE64.test(encoded) ? "base64" : "base64url");
}

/** A Standard Webhooks signer of one secret (new or old format); build once, sign many times. */
export function standardSigner(secret: string): Webhook {
  return new Webhook(standardKeyBytes(secret), { format: "raw" });
}

/**
 * The `webhook-signature` value: one `v1,<base64>` per signer (the current secret first, then
 * one still in its rotation overlap), space-separated.
 */
export function standardSignature(signers: readonly Webhook[], id: string, at: Date, body: string): string {
  return signers.map((signer) => signer.sign(id, at, body)).join(" ");
}
