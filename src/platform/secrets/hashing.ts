import { createHash, randomBytes, scrypt, timingSafeEqual } from "node:crypto";

/**
 * API keys carry ≥ 190 bits of randomness, so a fast SHA-256 is a safe lookup hash (the same
 * reasoning GitHub and Stripe use for tokens); passwords are low-entropy and get scrypt.
 */
export function hashApiKey(key: string): string {
  return createHash("sha256").update(key, "utf8").digest("hex");
}

export function constantTimeEqual(a: string, b: string): boolean {
  const left = createHash("sha256").update(a).digest();
  const right = createHash("sha256").update(b).digest();
  return timingSafeEqual(left, right);
}

/**
 * Password hashing: scrypt with N = 2^17, r = 8, p = 1 (128 MiB and about 0.3 s of one core per
 * hash; Node's default is N = 2^14, 16 MiB). The stored form names its parameters,
 * `scrypt$N=131072,r=8,p=1$<salt>$<hash>`, so that a hash made with other ones still verifies;
 * the older `scrypt$<salt>$<hash>` was made with Node's defaults. `needsRehash` says when a
 * stored hash is weaker than today's (the login then stores a new one).
 */
export interface ScryptCost {
  N: number;
  r: number;
  p: number;
}

export const PASSWORD_COST: ScryptCost = { N: 2 ** 17, r: 8, p: 1 };
/** What hashes stored without parameters were made with (Node's defaults). */
const LEGACY_COST: ScryptCost = { N: 2 ** 14, r: 8, p: 1 };
const KEY_LENGTH = 32;

/** Memory scrypt needs is about 128·N·r bytes; Node refuses above `maxmem` (32 MiB by default). */
function maxmemOf(cost: ScryptCost): number {
  return 2 * 128 * cost.N * cost.r * cost.p;
}

function scryptAsync(password: string, salt: Buffer, keylen: number, cost: ScryptCost): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    scrypt(password, salt, keylen, { ...cost, maxmem: maxmemOf(cost) }, (err, key) =>
      err ? reject(err) : resolve(key),
    );
  });
}

/** `cost`: PASSWORD_COST in the service (AppContext.passwordCost); a suite may pass a cheaper one. */
export async function hashPassword(password: string, cost: ScryptCost = PASSWORD_COST): Promise<string> {
  const salt = randomBytes(16);
  const { N, r, p } = cost;
  const hash = await scryptAsync(password, salt, KEY_LENGTH, cost);
  return `scrypt$N=${N},r=${r},p=${p}$${salt.toString("base64")}$${hash.toString("base64")}`;
}

interface StoredHash {
  cost: ScryptCost;
  salt: Buffer;
  hash: Buffer;
}

/** A stored hash's parts; undefined when it is not one of ours (or names absurd parameters). */
function parseStored(stored: string): StoredHash | undefined {
  const parts = stored.split("$");
  if (parts[0] !== "scrypt") return undefined;
  let cost = LEGACY_COST;
  let rest = parts.slice(1);
  if (parts.length === 4) {
    const match = /^N=(\d{1,8}),r=(\d{1,2}),p=(\d{1,2})$/.exec(parts[1] ?? "");
    if (!match) return undefined;
    cost = { N: Number(match[1]), r: Number(match[2]), p: Number(match[3]) };
    rest = parts.slice(2);
  } else if (parts.length !== 3) return undefined;
  // Bounded so that a stored value cannot ask for gigabytes.
  const { N, r, p } = cost;
  if (N < 2 ** 10 || N > 2 ** 20 || (N & (N - 1)) !== 0 || r < 1 || r > 32 || p < 1 || p > 16)
    return undefined;
  const [saltText, hashText] = rest;
  if (!saltText || !hashText) return undefined;
  return { cost, salt: Buffer.from(saltText, "base64"), hash: Buffer.from(hashText, "base64") };
}

export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const parsed = parseStored(stored);
  if (!parsed || parsed.hash.length === 0) return false;
  const actual = await scryptAsync(password, parsed.salt, parsed.hash.length, parsed.cost);
  return timingSafeEqual(actual, parsed.hash);
}

/** True when a stored hash was made with less than `cost` (or is not one we can read). */
export function needsRehash(stored: string, cost: ScryptCost = PASSWORD_COST): boolean {
  const parsed = parseStored(stored);
  if (!parsed) return true;
  const { N, r, p } = parsed.cost;
  return N < cost.N || r < cost.r || p < cost.p;
}

const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/** Uniform base62 string from rejection sampling (no modulo bias). */
export function randomBase62(length: number): string {
  let out = "";
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      if (byte < 248) out += BASE62[byte % 62];
      if (out.length === length) break;
    }
  }
  return out;
}
