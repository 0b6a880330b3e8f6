import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "./config.ts";

describe("loadConfig", () => {
  it("applies the documented defaults", () => {
    const config = loadConfig({});
    expect(config.port).toBe(3000);
    expect(config.host).toBe("0.0.0.0");
    expect(config.publicBaseUrl).toBe("http://localhost:3000");
    expect(config.adminSecret).toBeUndefined();
    expect(config.databaseUrl).toBeUndefined();
    expect(config.databasePreparedStatements).toBe(true);
    expect(config.rateLimit).toEqual({ windowMs: 60_000, sandbox: 100, live: 1000 });
    expect(config.dataDir.endsWith("/data")).toBe(true);
  });

  it("reads TRUST_PROXY as addresses and CIDR ranges, and refuses anything else", () => {
    expect(loadConfig({}).trustProxy).toEqual([]);
    expect(loadConfig({ TRUST_PROXY: "10.0.0.0/8, 127.0.0.1,::1" }).trustProxy).toEqual([
      "10.0.0.0/8",
      "127.0.0.1",
      "::1",
    ]);
    expect(() => loadConfig({ TRUST_PROXY: "10.0.0.0/8,proxy.internal" })).toThrow(
      'TRUST_PROXY must list IP addresses or CIDR ranges separated by commas, got "proxy.internal"',
    );
    expect(() => loadConfig({ TRUST_PROXY: "true" })).toThrow(ConfigError);
  });

  it("turns prepared statements off with DATABASE_PREPARED_STATEMENTS=false", () => {
    expect(loadConfig({ DATABASE_PREPARED_STATEMENTS: "false" }).databasePreparedStatements).toBe(false);
    expect(loadConfig({ DATABASE_PREPARED_STATEMENTS: "true" }).databasePreparedStatements).toBe(true);
  });

  it("derives the base URL from PORT and strips a trailing slash", () => {
    expect(loadConfig({ PORT: "8080" }).publicBaseUrl).toBe("http://localhost:8080");
    expect(loadConfig({ PUBLIC_BASE_URL: "https://pay.example.com/" }).publicBaseUrl).toBe(
      "https://pay.example.com",
    );
  });

  it.each([
    [{ PORT: "abc" }, /PORT/],
    [{ PORT: "70000" }, /PORT/],
    [{ ADMIN_SECRET: "short" }, /ADMIN_SECRET/],
    [{ DATABASE_URL: "mysql://x" }, /DATABASE_URL/],
    [{ ACCOUNT_SETTLEMENT_ADDRESS: "0x123" }, /ACCOUNT_SETTLEMENT_ADDRESS/],
    [{ ROLE: "everything" }, /ROLE/],
    [{ PUBLIC_BASE_URL: "ftp://x" }, /PUBLIC_BASE_URL/],
    [{ DATABASE_PREPARED_STATEMENTS: "sometimes" }, /DATABASE_PREPARED_STATEMENTS/],
    [{ MASTER_KEY: "abcd" }, /MASTER_KEY/],
  ])("rejects %j with a message naming the variable", (env, pattern) => {
    expect(() => loadConfig(env)).toThrow(ConfigError);
    expect(() => loadConfig(env)).toThrow(pattern);
  });

  it("requires MASTER_KEY with DATABASE_URL: instances sharing a server must share one key", () => {
    const server = { DATABASE_URL: "postgres://svc@127.0.0.1:5432/payments" };
    expect(() => loadConfig(server)).toThrow(ConfigError);
    expect(() => loadConfig(server)).toThrow(/MASTER_KEY is required when DATABASE_URL is set/);
    expect(() => loadConfig({ ...server, MASTER_KEY: "  " })).toThrow(/MASTER_KEY is required/);
    const key = "ab".repeat(32);
    expect(loadConfig({ ...server, MASTER_KEY: key })).toMatchObject({
      databaseUrl: server.DATABASE_URL,
      masterKey: key,
    });
    // The embedded database keeps its key file under DATA_DIR when MASTER_KEY is unset.
    expect(loadConfig({}).masterKey).toBeUndefined();
  });

  it("loads NETWORK_ENV_FILE with variables already set winning", () => {
    const file = join(mkdtempSync(join(tmpdir(), "env-")), "devnet.env");
    writeFileSync(file, "PORT=4000\nHOST=127.0.0.1\n");
    const config = loadConfig({ NETWORK_ENV_FILE: file, PORT: "5000" });
    expect(config.port).toBe(5000);
    expect(config.host).toBe("127.0.0.1");
  });
});
