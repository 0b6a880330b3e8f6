import { createCipheriv, randomBytes, scryptSync } from "node:crypto";
import { mkdtempSync, readFileSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { loadOrCreateMasterKeyFile, parseMasterKey, SecretBox } from "./encryption.ts";
import { hashApiKey, hashPassword, needsRehash, randomBase62, verifyPassword } from "./hashing.ts";

describe("SecretBox", () => {
  const box = new SecretBox(Buffer.alloc(32, 7));

  it("round-trips and never stores the plaintext", () => {
    const secret = "0xabc123";
    const stored = box.encrypt(secret);
    expect(stored.startsWith("v1:")).toBe(true);
    expect(stored).not.toContain(secret);
    expect(box.decrypt(stored)).toBe(secret);
    expect(box.encrypt(secret)).not.toBe(stored); // fresh IV each time
  });

  it("refuses tampered ciphertext and a wrong key", () => {
    const stored = box.encrypt("hello");
    const raw = Buffer.from(stored.slice(3), "base64");
    raw[raw.length - 1] = (raw[raw.length - 1] ?? 0) ^ 1;
    expect(() => box.decrypt(`v1:${raw.toString("base64")}`)).toThrow();
    expect(() => new SecretBox(Buffer.alloc(32, 8)).decrypt(stored)).toThrow();
  });

  it("refuses a truncated authentication tag (GCM would otherwise accept a 4-byte tag)", () => {
    // A forger only has to guess 32 bits for a 4-byte tag: a well-formed one for an empty secret.
    const iv = randomBytes(12);
    const cipher = createCipheriv("aes-256-gcm", Buffer.alloc(32, 7), iv, { authTagLength: 4 });
    const body = Buffer.concat([cipher.update(""), cipher.final()]);
    const stored = `v1:${Buffer.concat([iv, cipher.getAuthTag(), body]).toString("base64")}`;
    expect(() => box.decrypt(stored)).toThrow();
    // A full-length tag cut short is refused the same way.
    const whole = Buffer.from(box.encrypt("").slice(3), "base64");
    expect(() => box.decrypt(`v1:${whole.subarray(0, 20).toString("base64")}`)).toThrow();
  });

  it("parses hex and base64 master keys and rejects wrong lengths", () => {
    expect(parseMasterKey("ab".repeat(32)).length).toBe(32);
    expect(parseMasterKey(Buffer.alloc(32, 1).toString("base64")).length).toBe(32);
    expect(() => parseMasterKey("abcd")).toThrow(/32 bytes/);
  });

  it("creates a private key file once and reads it back", () => {
    const path = join(mkdtempSync(join(tmpdir(), "mk-")), "sub", "master.key");
    const first = loadOrCreateMasterKeyFile(path);
    expect(loadOrCreateMasterKeyFile(path).equals(first)).toBe(true);
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(readFileSync(path, "utf8").trim()).toBe(first.toString("hex"));
  });
});

describe("hashing", () => {
  it("hashes API keys deterministically", () => {
    expect(hashApiKey("svc_test_x")).toBe(hashApiKey("svc_test_x"));
    expect(hashApiKey("svc_test_x")).not.toBe(hashApiKey("svc_test_y"));
    expect(hashApiKey("svc_test_x")).toMatch(/^[0-9a-f]{64}$/);
  });

  it("verifies passwords", async () => {
    const stored = await hashPassword("correct horse battery");
    expect(await verifyPassword("correct horse battery", stored)).toBe(true);
    expect(await verifyPassword("wrong", stored)).toBe(false);
  });

  it("hashes passwords with scrypt at N = 2^17, r = 8, p = 1, named in the stored hash", async () => {
    const stored = await hashPassword("correct horse battery");
    const [scheme, params, salt, hash] = stored.split("$");
    expect([scheme, params]).toEqual(["scrypt", "N=131072,r=8,p=1"]);
    // The stored hash is what scrypt gives with exactly those parameters.
    const expected = scryptSync("correct horse battery", Buffer.from(salt ?? "", "base64"), 32, {
      N: 2 ** 17,
      r: 8,
      p: 1,
      maxmem: 256 * 1024 * 1024,
    });
    expect(hash).toBe(expected.toString("base64"));
    expect(needsRehash(stored)).toBe(false);
  });

  it("still verifies a hash stored without parameters (Node's defaults), and says it needs a new one", async () => {
    const salt = randomBytes(16);
    const legacy = `scrypt$${salt.toString("base64")}$${scryptSync("old password!", salt, 32).toString("base64")}`;
    expect(await verifyPassword("old password!", legacy)).toBe(true);
    expect(await verifyPassword("not it", legacy)).toBe(false);
    expect(needsRehash(legacy)).toBe(true);
  });

  it("refuses stored hashes that are not ours or name absurd parameters, without computing them", async () => {
    const salt = randomBytes(16).toString("base64");
    for (const stored of [
      "",
      "bcrypt$x$y",
      `scrypt$N=1073741824,r=8,p=1$${salt}$AAAA`,
      `scrypt$N=1000,r=8,p=1$${salt}$AAAA`,
    ])
      expect(await verifyPassword("anything", stored)).toBe(false);
  });

  it("makes base62 strings of the asked length", () => {
    const value = randomBase62(40);
    expect(value).toMatch(/^[0-9A-Za-z]{40}$/);
    expect(randomBase62(40)).not.toBe(value);
  });
});
