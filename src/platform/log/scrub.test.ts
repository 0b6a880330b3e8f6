import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { Writable } from "node:stream";
import Fastify from "fastify";
import pino from "pino";
import { createPublicClient, http } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../config.ts";
import { loggerOptions, scrubRequestUrl, scrubUrls, urlScrubber, urlSecrets } from "./scrub.ts";

// A provider key in an RPC URL never reaches a log line: the error viem raises for a failing
// RPC call (URL in its message, details, metaMessages and stack) is logged through the
// service's logger options, and the captured JSON lines are searched for the key.

const PATH_KEY = "pathKey0123456789abcdef";
const QUERY_KEY = "queryKey9876543210";

/** An RPC endpoint on 127.0.0.1 that fails every call, as a provider refusing a request does. */
let rpc: Server;
let rpcUrl: string;

beforeAll(async () => {
  rpc = createServer((_req, res) => {
    res.writeHead(500, { "content-type": "text/plain" });
    res.end("upstream unavailable");
  });
  await new Promise<void>((resolve) => rpc.listen(0, "127.0.0.1", resolve));
  const { port } = rpc.address() as AddressInfo;
  rpcUrl = `http://127.0.0.1:${port}/v2/${PATH_KEY}?apikey=${QUERY_KEY}`;
});

afterAll(async () => {
  await new Promise<void>((resolve) => rpc.close(() => resolve()));
});

const ADDRESS = "0x5555555555555555555555555555555555555555";

function configWithRpc() {
  return loadConfig({
    LOG_LEVEL: "info",
    LIVE_RPC_URL: rpcUrl,
    LIVE_CHAIN_ID: "31337",
    LIVE_USDC_ADDRESS: ADDRESS,
    LIVE_ADAO_ADDRESS: ADDRESS,
    LIVE_TREASURY_ADDRESS: ADDRESS,
  });
}

/** The error viem throws for a JSON-RPC call to `url` that the server refuses. */
async function viemError(url: string): Promise<Error> {
  const client = createPublicClient({ transport: http(url, { retryCount: 0 }) });
  try {
    await client.getBlockNumber();
  } catch (err) {
    return err as Error;
  }
  throw new Error("the RPC call did not fail");
}

/** A stream that keeps what pino writes to it. */
function capture(): { stream: Writable; text: () => string } {
  let text = "";
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      text += chunk.toString("utf8");
      done();
    },
  });
  return { stream, text: () => text };
}

describe("logged errors", () => {
  it("carry no RPC URL path or query: the provider key is gone, the host stays", async () => {
    const config = configWithRpc();
    const err = await viemError(rpcUrl);
    // The key is really in what viem raised.
    expect(err.message).toContain(PATH_KEY);

    const out = capture();
    const log = pino(loggerOptions(config), out.stream);
    log.error({ err }, "chain call failed");
    log.warn(err); // an error passed alone is serialized the same way
    log.error({ err }); // pino makes the error's message the line's
    const lines = out
      .text()
      .trim()
      .split("\n")
      .map(
        (line) => JSON.parse(line) as { msg: string; err: { message: string; stack: string; type: string } },
      );
    expect(lines).toHaveLength(3);
    expect(lines[0]?.msg).toBe("chain call failed");
    for (const line of lines) {
      const text = JSON.stringify(line);
      expect(text).not.toContain(PATH_KEY);
      expect(text).not.toContain(QUERY_KEY);
      expect(text).not.toContain("/v2/");
      // Still useful: what failed, where to, and the stack.
      expect(line.err.type).toBe("HttpRequestError");
      expect(line.err.message).toContain("HTTP request failed");
      expect(line.err.message).toContain(`URL: ${new URL(rpcUrl).origin}/…`);
      expect(line.err.stack).toMatch(/\n\s+at /);
    }
    // The message of an error logged without one is its (scrubbed) message.
    expect(lines[1]?.msg).toContain(`URL: ${new URL(rpcUrl).origin}/…`);
    expect(lines[2]?.msg).toContain(`URL: ${new URL(rpcUrl).origin}/…`);
  });

  it("carry no key through Fastify's error log of a failed request either", async () => {
    const config = configWithRpc();
    const out = capture();
    const app = Fastify({ logger: { ...loggerOptions(config), stream: out.stream } });
    app.get("/boom", async () => {
      throw await viemError(rpcUrl);
    });
    try {
      const res = await app.inject({ method: "GET", url: "/boom" });
      expect(res.statusCode).toBe(500);
    } finally {
      await app.close();
    }
    const errorLines = out
      .text()
      .trim()
      .split("\n")
      .filter((line) => line.includes('"err"'));
    expect(errorLines.length).toBeGreaterThan(0);
    for (const line of errorLines) {
      expect(line).toContain("HTTP request failed");
      expect(line).not.toContain(PATH_KEY);
      expect(line).not.toContain(QUERY_KEY);
    }
  });

  it("never show the token of a confirmation link in the request log line", async () => {
    const out = capture();
    const app = Fastify({
      logger: { ...loggerOptions(loadConfig({ LOG_LEVEL: "info" })), stream: out.stream },
    });
    app.get("/dashboard/email/confirm", async () => "ok");
    const token = "confirmToken0123456789abcdefXYZ";
    try {
      await app.inject({ method: "GET", url: `/dashboard/email/confirm?token=${token}&x=1` });
    } finally {
      await app.close();
    }
    expect(out.text()).toContain('"url":"/dashboard/email/confirm?token=…&x=1"');
    expect(out.text()).not.toContain(token);
    expect(scrubRequestUrl("/a?b=1&TOKEN=s3cret#f")).toBe("/a?b=1&TOKEN=…#f");
  });

  it("remove a configured URL's secret wherever it appears, also outside a URL", () => {
    const scrub = urlScrubber(configWithRpc());
    expect(scrub(`provider refused key ${PATH_KEY} (rate limited)`)).toBe(
      "provider refused key … (rate limited)",
    );
    expect(scrub(`apikey=${QUERY_KEY}`)).toBe("apikey=…");
  });

  it("remove a paymaster service URL's key too", () => {
    const key = "pm_live_0123456789abcdef";
    const config = loadConfig({
      LIVE_RPC_URL: rpcUrl,
      LIVE_CHAIN_ID: "31337",
      LIVE_USDC_ADDRESS: ADDRESS,
      LIVE_ADAO_ADDRESS: ADDRESS,
      LIVE_TREASURY_ADDRESS: ADDRESS,
      LIVE_BUNDLER_URL: "https://bundler.example.com/rpc",
      LIVE_PAYMASTER_URL: `https://paymaster.example.com/v2/8453/rpc?apikey=${key}`,
    });
    expect(urlScrubber(config)(`paymaster service refused key ${key}`)).toBe(
      "paymaster service refused key …",
    );
  });
});

describe("scrubUrls", () => {
  it.each([
    ["URL: https://eth-mainnet.g.alchemy.com/v2/abcDEF123", "URL: https://eth-mainnet.g.alchemy.com/…"],
    ["wss://base.example.org/ws?token=t0k3n&x=1 closed", "wss://base.example.org/… closed"],
    ["postgres://svc:hunter2hunter2@db.internal:5432/payments", "postgres://db.internal:5432/…"],
    ["redis://:pw@cache:6379", "redis://cache:6379"],
    ['{"url":"https://rpc.example/key123"}', '{"url":"https://rpc.example/…"}'],
    ["http://[::1]:8545/", "http://[::1]:8545/"],
    ["https://bundler.example#frag", "https://bundler.example/…"],
  ])("%s → %s", (input, expected) => {
    expect(scrubUrls(input)).toBe(expected);
  });

  it("leaves stack frames (file:// URLs) and text without URLs alone", () => {
    const frame = "    at send (file:///work/main/src/chain/transaction-sender.ts:120:7)";
    expect(scrubUrls(frame)).toBe(frame);
    expect(scrubUrls("Nonce too high")).toBe("Nonce too high");
  });

  it("takes user info, long path segments and query values of configured URLs as secrets", () => {
    expect(
      urlSecrets(["https://user:passw0rd!@rpc.example/v2/abcdefgh123?apikey=k3yk3yk3y&chain=1"]).sort(),
    ).toEqual(["abcdefgh123", "k3yk3yk3y", "passw0rd!"].sort());
  });
});
