import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { type Devnet, startDevnet } from "../../src/devnet/chain.ts";
import { openDatabase } from "../../src/platform/db/database.ts";
import { freshDatabaseUrl, startTestApp, type TestApp } from "../support/app.ts";
import { liveSmartWalletEnv } from "../support/devnet-env.ts";
import { type RpcCall, startRpcProxy } from "../support/rpc-proxy.ts";

// GET /ready for a load balancer (the real app on a real database, a real devnet with its bundler):
// 200 while the database, the live chain RPC and the live bundler answer, 503 naming the one that
// does not (its URL's secret-looking path and query never shown), 200 again once it is back.
// GET /health stays 200 throughout: it is liveness only.

const RPC_SECRET = "SECRETKEY12345";
const BUNDLER_SECRET = "BUNDLERKEY67890";
const ALL_OK = { database: "ok", "live.rpc": "ok", "live.bundler": "ok" };

type Mode = "pass" | "drop" | "error" | "hold";

interface Ready {
  status: number;
  body: { status: string; checks: Record<string, string> };
  raw: string;
  ms: number;
}

describe("/ready on the devnet", () => {
  let devnet: Devnet;
  let t: TestApp;
  let env: Record<string, string>;
  let rpcMode: Mode = "pass";
  let bundlerMode: Mode = "pass";
  const closers: Array<() => Promise<void>> = [];

  /** What a proxy does with each call while its mode is set. */
  /** Calls the RPC proxy held (mode "hold"), and the way to let them through. */
  let held: Array<() => void> = [];
  let heldCalls = 0;
  const behave = (mode: () => Mode) => async (_call: RpcCall) => {
    const m = mode();
    if (m === "hold") {
      heldCalls++;
      await new Promise<void>((resolve) => held.push(resolve));
      return undefined;
    }
    if (m === "drop") return "drop" as const;
    if (m === "error") return { error: { code: -32603, message: "upstream unavailable" } };
    return undefined;
  };

  beforeAll(async () => {
    devnet = await startDevnet({ accountAbstraction: true });
    const aa = devnet.aa;
    if (!aa) throw new Error("startDevnet({ accountAbstraction: true }) returned no aa");
    const rpc = await startRpcProxy(
      devnet.rpcUrl,
      behave(() => rpcMode),
    );
    closers.push(rpc.close);
    const bundler = await startRpcProxy(
      aa.bundlerUrl,
      behave(() => bundlerMode),
    );
    closers.push(bundler.close);
    // Provider-style URLs with the key in the path and in the query (the proxies ignore both).
    env = liveSmartWalletEnv(devnet, aa, {
      LIVE_RPC_URL: `${rpc.url}/v2/${RPC_SECRET}`,
      LIVE_BUNDLER_URL: `${bundler.url}/rpc?apikey=${BUNDLER_SECRET}`,
    });
    t = await startTestApp(env);
  }, 180_000);

  afterEach(() => {
    rpcMode = "pass";
    bundlerMode = "pass";
  });

  afterAll(async () => {
    if (devnet) process.kill(devnet.pid, "SIGCONT");
    await t?.close();
    for (const close of closers) await close();
    await devnet?.stop();
  });

  async function ready(app: TestApp = t): Promise<Ready> {
    const started = performance.now();
    const res = await app.request({ method: "GET", url: "/ready" });
    return { status: res.statusCode, body: res.json(), raw: res.body, ms: performance.now() - started };
  }

  async function healthy(app: TestApp = t): Promise<void> {
    const res = await app.request({ method: "GET", url: "/health" });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ status: "ok" });
  }

  /** Polls /ready (bounded) until it answers `status`; /health is 200 at every poll. */
  async function readyUntil(status: number, app: TestApp = t, timeoutMs = 15_000): Promise<Ready> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const r = await ready(app);
      await healthy(app);
      if (r.status === status) return r;
      if (Date.now() > deadline) throw new Error(`/ready stayed ${r.status}: ${r.raw}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  /** A 503 names exactly `failing` as not answering; the others are ok; no secret is shown. */
  function expectUnavailable(r: Ready, failing: string[]): void {
    expect(r.status).toBe(503);
    expect(r.body.status).toBe("unavailable");
    expect(Object.keys(r.body.checks).sort()).toEqual(Object.keys(ALL_OK).sort());
    for (const [name, outcome] of Object.entries(r.body.checks)) {
      if (failing.includes(name)) expect(outcome, name).toMatch(/^not answering: \S/);
      else expect(outcome, name).toBe("ok");
    }
    for (const secret of [RPC_SECRET, BUNDLER_SECRET, "/v2/", "apikey", "/rpc?"])
      expect(r.raw).not.toContain(secret);
    // A line, not a dump: no request body, no stack.
    for (const outcome of Object.values(r.body.checks)) {
      expect(outcome).not.toContain("\n");
      expect(outcome).not.toMatch(/Request body|at .*\.ts:\d+/);
    }
  }

  it("is 200 with the database, the live RPC and the live bundler all ok", async () => {
    const r = await ready();
    expect(r.status, r.raw).toBe(200);
    expect(r.body).toEqual({ status: "ready", checks: ALL_OK });
    await healthy();
  });

  it("turns 503 naming live.rpc when the RPC drops every call, and 200 again when it answers", async () => {
    rpcMode = "drop";
    const down = await readyUntil(503);
    expectUnavailable(down, ["live.rpc"]);
    expect(down.ms).toBeLessThan(5_000);
    rpcMode = "pass";
    const back = await readyUntil(200);
    expect(back.body).toEqual({ status: "ready", checks: ALL_OK });
  });

  it("joins a check still running instead of calling a hung RPC again at every poll", async () => {
    rpcMode = "hold";
    heldCalls = 0;
    for (let i = 0; i < 3; i++) expectUnavailable(await ready(), ["live.rpc"]);
    // Three polls of 2 s each, one call to the node between them.
    expect(heldCalls).toBe(1);
    rpcMode = "pass";
    for (const release of held) release();
    held = [];
    expect((await readyUntil(200)).body).toEqual({ status: "ready", checks: ALL_OK });
  });

  it("turns 503 naming live.rpc when the RPC answers errors", async () => {
    rpcMode = "error";
    expectUnavailable(await readyUntil(503), ["live.rpc"]);
    rpcMode = "pass";
    expect((await readyUntil(200)).body.checks).toEqual(ALL_OK);
  });

  it("turns 503 within the check's timeout while the devnet node is stopped (SIGSTOP), 200 after SIGCONT", async () => {
    process.kill(devnet.pid, "SIGSTOP");
    let down: Ready;
    try {
      down = await readyUntil(503);
    } finally {
      process.kill(devnet.pid, "SIGCONT");
    }
    expect(down.body.checks["live.rpc"]).toMatch(/^not answering: /);
    expect(down.body.checks.database).toBe("ok");
    expect(down.raw).not.toContain(RPC_SECRET);
    // Each check gives up after 2 s: the load balancer gets its answer.
    expect(down.ms).toBeLessThan(4_000);
    expect((await readyUntil(200)).body).toEqual({ status: "ready", checks: ALL_OK });
  });

  it("turns 503 naming live.rpc when the RPC's port refuses connections (its proxy closed)", async () => {
    const proxy = await startRpcProxy(devnet.rpcUrl, async () => undefined);
    const other = await startTestApp(
      { ...env, LIVE_RPC_URL: `${proxy.url}/v2/${RPC_SECRET}` },
      { database: t.database },
    );
    try {
      expect((await readyUntil(200, other)).body).toEqual({ status: "ready", checks: ALL_OK });
      await proxy.close();
      expectUnavailable(await readyUntil(503, other), ["live.rpc"]);
    } finally {
      await other.close(true);
    }
  });

  it("turns 503 naming live.bundler when the bundler does not answer, 200 again when it does", async () => {
    bundlerMode = "drop";
    expectUnavailable(await readyUntil(503), ["live.bundler"]);
    bundlerMode = "pass";
    expect((await readyUntil(200)).body).toEqual({ status: "ready", checks: ALL_OK });
  });

  it("names both when neither answers", async () => {
    rpcMode = "error";
    bundlerMode = "error";
    expectUnavailable(await readyUntil(503), ["live.rpc", "live.bundler"]);
  });
});

describe("/ready without a chain", () => {
  it("checks the database only, and turns 503 naming it when the database is closed", async () => {
    const fresh = await freshDatabaseUrl();
    const database = await openDatabase({ databaseUrl: fresh?.url, poolSize: 4 });
    const t = await startTestApp({}, { database });
    try {
      const up = await t.request({ method: "GET", url: "/ready" });
      expect(up.statusCode).toBe(200);
      expect(up.json()).toEqual({ status: "ready", checks: { database: "ok" } });
      await database.close();
      const down = await t.request({ method: "GET", url: "/ready" });
      expect(down.statusCode, down.body).toBe(503);
      expect(down.json()).toEqual({
        status: "unavailable",
        checks: { database: expect.stringMatching(/^not answering: \S/) },
      });
      expect(down.body).not.toContain("postgres://");
      const health = await t.request({ method: "GET", url: "/health" });
      expect(health.statusCode).toBe(200);
    } finally {
      await t.close(true);
      await fresh?.drop();
    }
  });
});
