import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { configRefusal } from "../test/support/config.ts";
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

  it("reads the job lease, 10 s unless set, 3 s at least", () => {
    expect(loadConfig({}).jobLeaseSeconds).toBe(10);
    expect(loadConfig({ JOB_LEASE_SECONDS: "3" }).jobLeaseSeconds).toBe(3);
    expect(() => loadConfig({ JOB_LEASE_SECONDS: "2" })).toThrow(
      "JOB_LEASE_SECONDS must be between 3 and 3600, got 2",
    );
  });

  it("reads the transfer lease, 20 s unless set, 4 s at least", () => {
    expect(loadConfig({}).transferLeaseSeconds).toBe(20);
    expect(loadConfig({ TRANSFER_LEASE_SECONDS: "5" }).transferLeaseSeconds).toBe(5);
    expect(() => loadConfig({ TRANSFER_LEASE_SECONDS: "3" })).toThrow(
      "TRANSFER_LEASE_SECONDS must be between 4 and 3600, got 3",
    );
  });

  it("reads WEBHOOK_ENDPOINT_RATE_PER_SECOND, 50 unless set, and refuses what is not 1 to 10000", () => {
    expect(loadConfig({}).webhookEndpointRatePerSecond).toBe(50);
    expect(loadConfig({ WEBHOOK_ENDPOINT_RATE_PER_SECOND: "" }).webhookEndpointRatePerSecond).toBe(50);
    expect(loadConfig({ WEBHOOK_ENDPOINT_RATE_PER_SECOND: "5" }).webhookEndpointRatePerSecond).toBe(5);
    expect(configRefusal({ WEBHOOK_ENDPOINT_RATE_PER_SECOND: "0" })).toBe(
      "WEBHOOK_ENDPOINT_RATE_PER_SECOND must be between 1 and 10000, got 0",
    );
    expect(configRefusal({ WEBHOOK_ENDPOINT_RATE_PER_SECOND: "0.5" })).toBe(
      'WEBHOOK_ENDPOINT_RATE_PER_SECOND must be a whole number, got "0.5"',
    );
  });

  it("reads WEBHOOK_PROBE_SECONDS, 5 unless set, and refuses what is not 1 to 3600", () => {
    expect(loadConfig({}).webhookProbeSeconds).toBe(5);
    expect(loadConfig({ WEBHOOK_PROBE_SECONDS: "30" }).webhookProbeSeconds).toBe(30);
    expect(configRefusal({ WEBHOOK_PROBE_SECONDS: "0" })).toBe(
      "WEBHOOK_PROBE_SECONDS must be between 1 and 3600, got 0",
    );
  });

  it("reads the hosted page's stream limits, 20 per payment and 50 per address unless set", () => {
    expect(loadConfig({}).hostedPageStreams).toEqual({ perPayment: 20, perAddress: 50 });
    // An empty value is unset, as for the other numbers.
    expect(
      loadConfig({ HOSTED_PAGE_SSE_PER_PAYMENT: "", HOSTED_PAGE_SSE_PER_ADDRESS: "" }).hostedPageStreams,
    ).toEqual({ perPayment: 20, perAddress: 50 });
    expect(
      loadConfig({ HOSTED_PAGE_SSE_PER_PAYMENT: "1", HOSTED_PAGE_SSE_PER_ADDRESS: "100000" })
        .hostedPageStreams,
    ).toEqual({ perPayment: 1, perAddress: 100_000 });
  });

  it.each([
    ["HOSTED_PAGE_SSE_PER_PAYMENT", "0", "HOSTED_PAGE_SSE_PER_PAYMENT must be between 1 and 100000, got 0"],
    ["HOSTED_PAGE_SSE_PER_PAYMENT", "-3", 'HOSTED_PAGE_SSE_PER_PAYMENT must be a whole number, got "-3"'],
    ["HOSTED_PAGE_SSE_PER_PAYMENT", "2.5", 'HOSTED_PAGE_SSE_PER_PAYMENT must be a whole number, got "2.5"'],
    [
      "HOSTED_PAGE_SSE_PER_ADDRESS",
      "100001",
      "HOSTED_PAGE_SSE_PER_ADDRESS must be between 1 and 100000, got 100001",
    ],
    ["HOSTED_PAGE_SSE_PER_ADDRESS", "many", 'HOSTED_PAGE_SSE_PER_ADDRESS must be a whole number, got "many"'],
  ])("refuses %s=%s, naming the variable and the value", (name, value, message) => {
    expect(configRefusal({ [name]: value })).toBe(message);
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

  describe("sandbox and live on one chain (D21)", () => {
    const network = (p: "SANDBOX" | "LIVE", rpcUrl: string, chainId: string): Record<string, string> => ({
      [`${p}_RPC_URL`]: rpcUrl,
      [`${p}_CHAIN_ID`]: chainId,
      [`${p}_USDC_ADDRESS`]: `0x${"1".repeat(40)}`,
      [`${p}_ADAO_ADDRESS`]: `0x${"2".repeat(40)}`,
      [`${p}_TREASURY_ADDRESS`]: `0x${"3".repeat(40)}`,
    });
    const SECRET_RPC = "https://base-mainnet.example.com/v2/secret-api-key-123";

    it("starts with two different chains", () => {
      const config = loadConfig({
        ...network("SANDBOX", "https://base-sepolia.example.com/v2/secret-api-key-123", "84532"),
        ...network("LIVE", SECRET_RPC, "8453"),
      });
      expect(config.networks.sandbox.map((n) => [n.id, n.chainId])).toEqual([["default", 84532]]);
      expect(config.networks.live.map((n) => [n.id, n.chainId])).toEqual([["default", 8453]]);
    });

    it("refuses the same chain id, naming both variables", () => {
      const env = {
        ...network("SANDBOX", "https://base-sepolia.example.com/v2/other", "8453"),
        ...network("LIVE", SECRET_RPC, "8453"),
      };
      expect(() => loadConfig(env)).toThrow(ConfigError);
      expect(() => loadConfig(env)).toThrow(
        "SANDBOX_CHAIN_ID and LIVE_CHAIN_ID name the same chain (8453): sandbox and live must be different networks",
      );
    });

    it.each([
      ["the same text", SECRET_RPC],
      ["another case of scheme and host", "HTTPS://Base-Mainnet.EXAMPLE.com/v2/secret-api-key-123"],
      ["a trailing slash", `${SECRET_RPC}/`],
      ["the default port", "https://base-mainnet.example.com:443/v2/secret-api-key-123"],
      ["the WebSocket scheme", "wss://base-mainnet.example.com/v2/secret-api-key-123"],
    ])("refuses the same RPC URL written with %s, without printing it", (_, sandboxUrl) => {
      const env = { ...network("SANDBOX", sandboxUrl, "84532"), ...network("LIVE", SECRET_RPC, "8453") };
      let error: unknown;
      try {
        loadConfig(env);
      } catch (err) {
        error = err;
      }
      expect(error).toBeInstanceOf(ConfigError);
      const message = (error as ConfigError).message;
      expect(message).toBe(
        "SANDBOX_RPC_URL and LIVE_RPC_URL point at the same node: sandbox and live must be different networks",
      );
      expect(message).not.toMatch(/secret-api-key|example\.com/i);
    });

    it("tells different paths on one host apart (one provider, two networks)", () => {
      const config = loadConfig({
        ...network("SANDBOX", "https://rpc.example.com/base-sepolia", "84532"),
        ...network("LIVE", "https://rpc.example.com/base", "8453"),
      });
      expect(config.networks.live[0]?.rpcUrl).toBe("https://rpc.example.com/base");
    });
  });

  describe("several networks of one environment (D22)", () => {
    const network = (p: string, rpcUrl: string, chainId: string): Record<string, string> => ({
      [`${p}_RPC_URL`]: rpcUrl,
      [`${p}_CHAIN_ID`]: chainId,
      [`${p}_USDC_ADDRESS`]: `0x${"1".repeat(40)}`,
      [`${p}_ADAO_ADDRESS`]: `0x${"2".repeat(40)}`,
      [`${p}_TREASURY_ADDRESS`]: `0x${"3".repeat(40)}`,
    });
    const refusal = configRefusal;

    it("reads each network LIVE_NETWORKS lists from its own variables, the first the default", () => {
      const config = loadConfig({
        LIVE_NETWORKS: "base, polygon-pos",
        ...network("LIVE_BASE", "https://rpc.example.com/base", "8453"),
        ...network("LIVE_POLYGON_POS", "https://rpc.example.com/polygon", "137"),
        LIVE_POLYGON_POS_NAME: "Polygon PoS",
        LIVE_POLYGON_POS_CONFIRMATIONS: "20",
      });
      expect(
        config.networks.live.map(({ environment, id, caip2, name, chainId, confirmations }) => ({
          environment,
          id,
          caip2,
          name,
          chainId,
          confirmations,
        })),
      ).toEqual([
        {
          environment: "live",
          id: "base",
          caip2: "eip155:8453",
          name: "Base",
          chainId: 8453,
          confirmations: 2,
        },
        {
          environment: "live",
          id: "polygon-pos",
          caip2: "eip155:137",
          name: "Polygon PoS",
          chainId: 137,
          confirmations: 20,
        },
      ]);
      expect(config.networks.sandbox).toEqual([]);
    });

    it("reads a network's public wallet endpoint apart from its RPC URL, and refuses one that is no http(s) URL", () => {
      const config = loadConfig({
        LIVE_NETWORKS: "base",
        ...network("LIVE_BASE", "https://rpc.example.com/base?key=secret", "8453"),
        LIVE_BASE_WALLET_RPC_URL: "https://mainnet.base.org",
      });
      expect(config.networks.live[0]?.walletRpcUrl).toBe("https://mainnet.base.org");
      expect(
        loadConfig(network("LIVE", "https://rpc.example.com/x", "8453")).networks.live[0]?.walletRpcUrl,
      ).toBe(undefined);
      expect(
        refusal({
          ...network("LIVE", "https://rpc.example.com/x", "8453"),
          LIVE_WALLET_RPC_URL: "wss://rpc.example.com",
        }),
      ).toBe("LIVE_WALLET_RPC_URL must use http: or https:");
    });

    it("keeps the old variables as the network default, listed or alone", () => {
      const old = network("LIVE", "https://rpc.example.com/base", "8453");
      expect(loadConfig(old).networks.live.map((n) => n.id)).toEqual(["default"]);
      const both = loadConfig({
        ...old,
        LIVE_NETWORKS: "polygon,default",
        ...network("LIVE_POLYGON", "https://rpc.example.com/polygon", "137"),
      });
      expect(both.networks.live.map((n) => [n.id, n.chainId])).toEqual([
        ["polygon", 137],
        ["default", 8453],
      ]);
    });

    it("names the variable of the field that is wrong", () => {
      const base = { LIVE_NETWORKS: "base", ...network("LIVE_BASE", "https://rpc.example.com/base", "8453") };
      expect(refusal({ ...base, LIVE_BASE_USDC_ADDRESS: "0x12" })).toBe(
        "LIVE_BASE_USDC_ADDRESS must be 0x followed by 40 hex characters",
      );
      expect(refusal({ ...base, LIVE_BASE_CONFIRMATIONS: "many" })).toBe(
        'LIVE_BASE_CONFIRMATIONS must be a whole number, got "many"',
      );
      expect(refusal({ ...base, LIVE_BASE_CHAIN_ID: "" })).toBe(
        "LIVE_BASE_CHAIN_ID is required when LIVE_BASE_RPC_URL is set",
      );
      expect(refusal({ LIVE_NETWORKS: "base" })).toBe(
        "LIVE_BASE_RPC_URL is required: LIVE_NETWORKS lists base",
      );
    });

    it.each([
      [
        "Base",
        'LIVE_NETWORKS must list network ids (lowercase letters, digits and "-", starting with a letter), got "Base"',
      ],
      [
        "base,,polygon",
        'LIVE_NETWORKS must list network ids (lowercase letters, digits and "-", starting with a letter), got ""',
      ],
      ["base,base", "LIVE_NETWORKS names base twice"],
      ["sandbox-b", 'LIVE_NETWORKS: "sandbox-b" is kept for the sandbox\'s simulated networks'],
    ])("refuses LIVE_NETWORKS=%s", (listed, message) => {
      expect(
        refusal({ LIVE_NETWORKS: listed, ...network("LIVE_BASE", "https://rpc.example.com/base", "8453") }),
      ).toBe(message);
    });

    it("refuses LIVE_RPC_URL beside a LIVE_NETWORKS that does not list default", () => {
      expect(
        refusal({
          ...network("LIVE", "https://rpc.example.com/old", "1"),
          LIVE_NETWORKS: "base",
          ...network("LIVE_BASE", "https://rpc.example.com/base", "8453"),
        }),
      ).toBe("LIVE_RPC_URL is set but LIVE_NETWORKS does not list default: list it, or unset LIVE_RPC_URL");
    });

    it("refuses two networks of one environment on one chain, or on one node", () => {
      const two = (polygonUrl: string, polygonChain: string) => ({
        LIVE_NETWORKS: "base,polygon",
        ...network("LIVE_BASE", "https://rpc.example.com/base", "8453"),
        ...network("LIVE_POLYGON", polygonUrl, polygonChain),
      });
      expect(refusal(two("https://rpc.example.com/polygon", "8453"))).toBe(
        "LIVE_BASE_CHAIN_ID and LIVE_POLYGON_CHAIN_ID name the same chain (8453): the networks of live must be different chains",
      );
      expect(refusal(two("https://RPC.example.com/base/", "137"))).toBe(
        "LIVE_BASE_RPC_URL and LIVE_POLYGON_RPC_URL point at the same node: the networks of live must be different chains",
      );
    });

    it("refuses a sandbox network on a chain one of live's is on", () => {
      expect(
        refusal({
          LIVE_NETWORKS: "base,polygon",
          ...network("LIVE_BASE", "https://rpc.example.com/base", "8453"),
          ...network("LIVE_POLYGON", "https://rpc.example.com/polygon", "137"),
          SANDBOX_NETWORKS: "amoy",
          ...network("SANDBOX_AMOY", "https://rpc.example.com/amoy", "137"),
        }),
      ).toBe(
        "SANDBOX_AMOY_CHAIN_ID and LIVE_POLYGON_CHAIN_ID name the same chain (137): sandbox and live must be different networks",
      );
    });
  });

  describe("a network's paymaster (D11): an ERC-7677 service or a bare address", () => {
    const base = {
      LIVE_RPC_URL: "https://rpc.example.com/base",
      LIVE_CHAIN_ID: "8453",
      LIVE_USDC_ADDRESS: `0x${"1".repeat(40)}`,
      LIVE_ADAO_ADDRESS: `0x${"2".repeat(40)}`,
      LIVE_TREASURY_ADDRESS: `0x${"3".repeat(40)}`,
      LIVE_BUNDLER_URL: "https://bundler.example.com/rpc",
    };
    const paymasterOf = (env: Record<string, string>) =>
      loadConfig({ ...base, ...env }).networks.live[0]?.accountAbstraction?.paymaster;
    const refusal = configRefusal;

    it("reads a service's URL and its context, or a bare paymaster's address", () => {
      const url = "https://api.paymaster.example.com/v2/8453/rpc?apikey=pim_secret";
      expect(paymasterOf({ LIVE_PAYMASTER_URL: url })).toEqual({ kind: "service", url, context: undefined });
      expect(
        paymasterOf({ LIVE_PAYMASTER_URL: url, LIVE_PAYMASTER_CONTEXT: '{"sponsorshipPolicyId":"sp_1"}' }),
      ).toEqual({ kind: "service", url, context: { sponsorshipPolicyId: "sp_1" } });
      expect(paymasterOf({ LIVE_PAYMASTER_ADDRESS: `0x${"4".repeat(40)}` })).toEqual({
        kind: "address",
        address: `0x${"4".repeat(40)}`,
      });
    });

    it("refuses both, neither, a context without a service, and a context that is not an object", () => {
      const url = "https://api.paymaster.example.com/v2/8453/rpc?apikey=pim_secret";
      expect(
        refusal({ ...base, LIVE_PAYMASTER_URL: url, LIVE_PAYMASTER_ADDRESS: `0x${"4".repeat(40)}` }),
      ).toBe(
        "LIVE_PAYMASTER_URL and LIVE_PAYMASTER_ADDRESS are both set: a network has one paymaster, a service or a bare address",
      );
      expect(refusal(base)).toBe(
        "LIVE_PAYMASTER_URL or LIVE_PAYMASTER_ADDRESS is required when LIVE_BUNDLER_URL is set (smart wallet gas is sponsored)",
      );
      expect(
        refusal({ ...base, LIVE_PAYMASTER_ADDRESS: `0x${"4".repeat(40)}`, LIVE_PAYMASTER_CONTEXT: "{}" }),
      ).toBe("LIVE_PAYMASTER_CONTEXT is set without LIVE_PAYMASTER_URL: it is the service's");
      for (const context of ["[1]", "sp_1", "null"])
        expect(refusal({ ...base, LIVE_PAYMASTER_URL: url, LIVE_PAYMASTER_CONTEXT: context })).toBe(
          'LIVE_PAYMASTER_CONTEXT must be a JSON object, e.g. {"sponsorshipPolicyId":"sp_1"}',
        );
      // The URL may carry an API key: a refusal never shows it.
      expect(refusal({ ...base, LIVE_PAYMASTER_URL: "ftp://pim_secret@example.com" })).toBe(
        "LIVE_PAYMASTER_URL must use http: or https:",
      );
    });
  });
});
