import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";

// Encryption at rest for private keys and signing secrets: AES-256-GCM with a 32-byte master key.
// Stored form: "v1:" + base64(iv[12] | tag[16] | ciphertext). The version prefix leaves room for
// key rotation without guessing formats later.

const VERSION = "v1";
const IV_BYTES = 12;
/** GCM accepts tags as short as 4 bytes unless told the length: a short one is easy to forge. */
const TAG_BYTES = 16;

export class SecretBox {
  readonly #key: Buffer;

  constructor(masterKey: Buffer) {
    if (masterKey.length !== 32) throw new Error("master key must be 32 bytes");
    this.#key = masterKey;
  }

  encrypt(plaintext: string): string {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv("aes-256-gcm", this.#key, iv);
    const body = Buffer.concat([cipher.update(plaintext, "utf8"), cipher.final()]);
    return `${VERSION}:${Buffer.concat([iv, cipher.getAuthTag(), body]).toString("base64")}`;
  }

  decrypt(stored: string): string {
    const [version, payload] = stored.split(":", 2);
    if (version !== VERSION || !payload) throw new Error("unknown secret format");
    const raw = Buffer.from(payload, "base64");
    const decipher = createDecipheriv("aes-256-gcm", this.#key, raw.subarray(0, IV_BYTES), {
      authTagLength: TAG_BYTES,
    });
    decipher.setAuthTag(raw.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
    const body = raw.subarray(IV_BYTES + TAG_BYTES);
    return Buffer.concat([decipher.update(body), decipher.final()]).toString("utf8");
  }
}

/** MASTER_KEY is 64 hex characters or base64 of 32 bytes. */
export function parseMasterKey(text: string): Buffer {
  const trimmed = text.trim();
  const key = /^[0-9a-fA-F]{64}$/.test(trimmed)
    ? Buffer.from(trimmed, "hex")
    : Buffer.from(trimmed, "base64");
  if (key.length !== 32) throw new Error("MASTER_KEY must be 32 bytes: 64 hex characters or base64");
  return key;
}

/**
 * Reads the master key file, creating it (mode 0600) on first start. Used only when MASTER_KEY is
 * unset, so a laptop install works with no setup; several instances must share MASTER_KEY instead.
 */
export function loadOrCreateMasterKeyFile(path: string): Buffer {
  if (existsSync(path)) return parseMasterKey(readFileSync(path, "utf8"));
  mkdirSync(dirname(path), { recursive: true });
  const key = randomBytes(32);
  writeFileSync(path, `${key.toString("hex")}\n`, { mode: 0o600, flag: "wx" });
  chmodSync(path, 0o600);
  return key;
}
