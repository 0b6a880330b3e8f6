import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { connect, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { freePort } from "../../src/devnet/chain.ts";
import {
  callService,
  type Exit,
  type NodeProcess,
  type ServiceProcess,
  spawnNode,
  startService,
  stopAllServices,
} from "../support/service-process.ts";

// The real process (D1): `node src/main.ts` on the embedded database under DATA_DIR, graceful
// SIGTERM, persistence across restarts, the master key file, the CLI of D2 and config errors.

const ADMIN = "process-test-admin-secret-0123456789";
const MERCHANT = "0x3333333333333333333333333333333333333333";
const TEST_TIMEOUT_MS = 180_000;

// Every process here runs on its embedded database whatever the pass (cleanEnv drops
// DATABASE_URL), so these run once, in npm test; the PostgreSQL pass runs what names a server.
const embeddedIt = it.skipIf(Boolean(process.env.DATABASE_URL));

const tempDirs: string[] = [];

function freshDataDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "svc-process-test-"));
  tempDirs.push(dir);
  return dir;
}

async function waitForExit(spawned: NodeProcess, ms: number): Promise<Exit> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`process did not exit within ${ms} ms\nstderr: ${spawned.stderr()}`)),
      ms,
    );
  });
  try {
    return await Promise.race([spawned.exited, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

async function startServer(dataDir: string, extraEnv: Record<string, string> = {}): Promise<ServiceProcess> {
  const server = await startService({ DATA_DIR: dataDir, ADMIN_SECRET: ADMIN, ...extraEnv });
  expect(server.health).toEqual({ status: "ok" });
  return server;
}

async function stopServer(server: NodeProcess): Promise<Exit> {
  server.child.kill("SIGTERM");
  return waitForExit(server, 30_000);
}

interface IssuedKeyJson {
  id: string;
  key: string;
  prefix: string;
  environment: string;
}

interface WorkspaceJson {
  id: string;
  name: string;
  eoa: { address: string; createdAt: string };
  [field: string]: unknown;
}

interface CreatedWorkspaceJson {
  workspace: WorkspaceJson;
  apiKeys: { test: IssuedKeyJson; live: IssuedKeyJson };
}

interface PaymentJson {
  payment: { id: string; status: string; [field: string]: unknown };
}

afterEach(async () => {
  await stopAllServices();
});

afterAll(async () => {
  await stopAllServices();
  for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true });
});

describe("the service process", () => {
  embeddedIt(
    "serves over HTTP, stops with exit code 0 on SIGTERM and keeps its data across restarts",
    async () => {
      const dataDir = freshDataDir();
      const first = await startServer(dataDir);

      const ready = await callService(first, "GET", "/ready");
      expect(ready.status).toBe(200);

      const created = await callService<CreatedWorkspaceJson>(first, "POST", "/api/v1/workspaces", ADMIN, {
        name: "Persisted Co",
        settlementAddress: MERCHANT,
      });
      expect(created.status).toBe(201);
      const workspaceId: string = created.json.workspace.id;
      const eoaAddress: string = created.json.workspace.eoa.address;
      const testKey: string = created.json.apiKeys.test.key;
      const liveKey: string = created.json.apiKeys.live.key;
      expect(testKey).toMatch(/^svc_test_[0-9A-Za-z]{32,}$/);

      const payment = await callService<PaymentJson>(first, "POST", "/api/v1/payments", testKey, {
        tokenSymbol: "USDC",
        amount: "100",
        merchantWallet: MERCHANT,
        description: "before restart",
      });
      expect(payment.status).toBe(201);
      const paymentId: string = payment.json.payment.id;
      expect(payment.json.payment.status).toBe("forwarded");

      // The master key file is created on first start, readable by the owner only.
      const masterKeyPath = join(dataDir, "master.key");
      expect(existsSync(masterKeyPath)).toBe(true);
      expect(statSync(masterKeyPath).mode & 0o777).toBe(0o600);
      const masterKey = readFileSync(masterKeyPath, "utf8");
      expect(masterKey.trim().length).toBeGreaterThan(0);
      expect(masterKey).not.toContain(ADMIN);

      const firstExit = await stopServer(first);
      expect(firstExit, `stderr: ${first.stderr()}`).toEqual({ code: 0, signal: null });
      expect(first.stderr()).not.toMatch(/error/i);

      // The embedded database lives under DATA_DIR.
      expect(readdirSync(dataDir).filter((name) => name !== "master.key").length).toBeGreaterThan(0);

      const second = await startServer(dataDir);
      const ws = await callService<{ workspace: WorkspaceJson }>(
        second,
        "GET",
        `/api/v1/workspaces/${workspaceId}`,
        testKey,
      );
      expect(ws.status).toBe(200);
      expect(ws.json.workspace).toMatchObject({
        id: workspaceId,
        name: "Persisted Co",
        settlement_address: MERCHANT,
        defaultWalletType: "workspace",
      });
      expect(ws.json.workspace.eoa.address).toBe(eoaAddress);

      const asAdmin = await callService<{ workspace: WorkspaceJson }>(
        second,
        "GET",
        `/api/v1/workspaces/${workspaceId}`,
        ADMIN,
      );
      expect(asAdmin.status).toBe(200);
      expect(asAdmin.json.workspace.name).toBe("Persisted Co");

      const liveRead = await callService(second, "GET", `/api/v1/workspaces/${workspaceId}`, liveKey);
      expect(liveRead.status).toBe(200);

      const read = await callService<PaymentJson>(second, "GET", `/api/v1/payments/${paymentId}`, testKey);
      expect(read.status).toBe(200);
      expect(read.json.payment).toMatchObject({
        id: paymentId,
        status: "forwarded",
        grossAmount: "100.00",
        feeAmount: "1.50",
        netAmount: "98.50",
        merchantWallet: MERCHANT,
        description: "before restart",
        environment: "sandbox",
      });

      // The same master key is reused, not regenerated.
      expect(readFileSync(masterKeyPath, "utf8")).toBe(masterKey);
      expect(statSync(masterKeyPath).mode & 0o777).toBe(0o600);

      const secondExit = await stopServer(second);
      expect(secondExit, `stderr: ${second.stderr()}`).toEqual({ code: 0, signal: null });
    },
    TEST_TIMEOUT_MS,
  );

  embeddedIt(
    "on SIGTERM lets running requests finish, also those whose client hung up, before closing the database",
    async () => {
      const dataDir = freshDataDir();
      // Info logs say when each request has reached the service ("incoming request").
      const info = { LOG_LEVEL: "info" };
      const first = await startServer(dataDir, info);
      const created = await callService<CreatedWorkspaceJson>(first, "POST", "/api/v1/workspaces", ADMIN, {
        name: "Shutdown Co",
      });
      expect(created.status).toBe(201);
      const testKey = created.json.apiKeys.test.key;
      const funded = await callService(first, "POST", "/api/v1/sandbox/faucet", testKey, {
        tokenSymbol: "USDC",
        amount: "1000",
      });
      expect(funded.status).toBe(200);

      // Sandbox payouts use the database for several statements each.
      const payoutBody = (i: number) => ({
        tokenSymbol: "USDC",
        amount: "1",
        destinationAddress: MERCHANT,
        idempotencyKey: `shutdown-${i}`,
      });
      const send = (server: ServiceProcess, i: number, signal: AbortSignal) =>
        fetch(`${server.baseUrl}/api/v1/payouts`, {
          method: "POST",
          headers: { authorization: `Bearer ${testKey}`, "content-type": "application/json" },
          body: JSON.stringify(payoutBody(i)),
          signal,
        });
      // Requests the service has logged so far (startServer's /health polls included).
      const arrived = (server: ServiceProcess) => server.stdout().split("incoming request").length - 1;
      /** Waits until `count` more requests than `before` have reached the service. */
      const untilArrived = async (server: ServiceProcess, before: number, count: number) => {
        const deadline = Date.now() + 15_000;
        while (arrived(server) - before < count && Date.now() < deadline) {
          await new Promise((resolve) => setTimeout(resolve, 2));
        }
        expect(arrived(server) - before).toBeGreaterThanOrEqual(count);
      };
      const expectCleanStop = async (server: ServiceProcess) => {
        const exit = await waitForExit(server, 30_000);
        expect(exit, `log: ${server.stdout().slice(-4000)}`).toEqual({ code: 0, signal: null });
        expect(server.stderr()).toBe("");
        expect(server.stdout()).toContain('"msg":"stopped"');
        // Nothing failed on a database closed under a running request (pino: 50 = error).
        expect(server.stdout()).not.toMatch(/"level":(50|60)|destroyed|closed/);
      };

      // 1. Every client resets its connection while its payout runs (as a killed client does), and
      // the process is told to stop: no connection is left to wait for, yet the database must stay
      // open until the last handler is done.
      const arrivedBefore = arrived(first);
      const port = Number(new URL(first.baseUrl).port);
      const sockets = await Promise.all(
        Array.from(
          { length: 30 },
          (_, i) =>
            new Promise<Socket>((resolve, reject) => {
              const body = JSON.stringify(payoutBody(i));
              const socket = connect(port, "127.0.0.1", () => {
                socket.write(
                  `POST /api/v1/payouts HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer ${testKey}\r\n` +
                    `content-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
                );
                resolve(socket);
              });
              socket.on("error", reject);
            }),
        ),
      );
      await untilArrived(first, arrivedBefore, 30);
      for (const socket of sockets) socket.resetAndDestroy();
      first.child.kill("SIGTERM");
      await expectCleanStop(first);

      // 2. Clients that wait get their answers, and their keep-alive connections do not hold the
      // process open: answers given while stopping say `Connection: close`.
      const second = await startServer(dataDir, info);
      const secondBefore = arrived(second);
      const awaited = Array.from({ length: 20 }, (_, i) =>
        send(second, 30 + i, AbortSignal.timeout(30_000)).then(async (res) => ({
          status: res.status,
          connection: res.headers.get("connection"),
          body: (await res.json()) as unknown,
        })),
      );
      await untilArrived(second, secondBefore, 20);
      second.child.kill("SIGTERM");
      const answers = await Promise.all(awaited);
      for (const answer of answers)
        expect(answer, JSON.stringify(answer.body)).toMatchObject({ status: 200 });
      expect(answers.filter((answer) => answer.connection === "close").length).toBeGreaterThan(0);
      await expectCleanStop(second);

      // Every payout that reached the service before SIGTERM completed, the hung-up ones too; and
      // repeating each key now sends nothing more: exactly 50 USDC left the wallet.
      const third = await startServer(dataDir);
      const completed = await callService<{ payouts: unknown[] }>(
        third,
        "GET",
        "/api/v1/payouts?limit=100",
        testKey,
      );
      expect(completed.json.payouts).toHaveLength(50);
      for (let i = 0; i < 50; i++) {
        const repeat = await callService<{ payout: { status: string } }>(
          third,
          "POST",
          "/api/v1/payouts",
          testKey,
          payoutBody(i),
        );
        expect(repeat.status, JSON.stringify(repeat.json)).toBe(200);
        expect(repeat.json.payout.status).toBe("completed");
      }
      const history = await callService<{ payouts: unknown[] }>(
        third,
        "GET",
        "/api/v1/payouts?limit=100",
        testKey,
      );
      expect(history.json.payouts).toHaveLength(50);
      const balance = await callService(third, "GET", "/api/v1/wallet/balance", testKey);
      expect(JSON.stringify(balance.json)).toContain('"950');
      const thirdExit = await stopServer(third);
      expect(thirdExit, `stderr: ${third.stderr()}`).toEqual({ code: 0, signal: null });
    },
    TEST_TIMEOUT_MS,
  );

  embeddedIt(
    "refuses a bad configuration (PORT=abc) with a non-zero exit and a message naming PORT",
    async () => {
      const dataDir = freshDataDir();
      const spawned = spawnNode(["src/main.ts"], {
        PORT: "abc",
        HOST: "127.0.0.1",
        DATA_DIR: dataDir,
        ADMIN_SECRET: ADMIN,
        LOG_LEVEL: "warn",
      });
      const exit = await waitForExit(spawned, 30_000);
      expect(exit.signal).toBeNull();
      expect(exit.code).not.toBe(0);
      expect(exit.code).not.toBeNull();
      expect(spawned.stderr()).toContain("PORT");
      expect(spawned.stderr()).not.toMatch(/\n\s+at /);
    },
    TEST_TIMEOUT_MS,
  );

  embeddedIt(
    "refuses an out-of-range PORT the same way",
    async () => {
      const spawned = spawnNode(["src/main.ts"], {
        PORT: "70000",
        HOST: "127.0.0.1",
        DATA_DIR: freshDataDir(),
        LOG_LEVEL: "warn",
      });
      const exit = await waitForExit(spawned, 30_000);
      expect(exit.code).not.toBe(0);
      expect(exit.code).not.toBeNull();
      expect(spawned.stderr()).toContain("PORT");
    },
    TEST_TIMEOUT_MS,
  );
});

describe("the master key", () => {
  embeddedIt(
    "refuses a start with another MASTER_KEY than the database's secrets were written with: one line, exit 2, server and CLI",
    async () => {
      const dataDir = freshDataDir();
      const keyA = randomBytes(32).toString("hex");
      const keyB = randomBytes(32).toString("base64");
      const first = await startServer(dataDir, { MASTER_KEY: keyA });
      const created = await callService<CreatedWorkspaceJson>(first, "POST", "/api/v1/workspaces", ADMIN, {
        name: "Keyed Co",
      });
      expect(created.status).toBe(201);
      expect(await stopServer(first), `stderr: ${first.stderr()}`).toEqual({ code: 0, signal: null });
      // MASTER_KEY given: no key file is made.
      expect(existsSync(join(dataDir, "master.key"))).toBe(false);

      const expected =
        "Configuration error: MASTER_KEY does not match the key this database's secrets were encrypted with\n";
      const wrong = spawnNode(["src/main.ts"], {
        PORT: String(await freePort()),
        HOST: "127.0.0.1",
        DATA_DIR: dataDir,
        ADMIN_SECRET: ADMIN,
        LOG_LEVEL: "warn",
        MASTER_KEY: keyB,
      });
      expect(await waitForExit(wrong, 60_000)).toEqual({ code: 2, signal: null });
      expect(wrong.stderr()).toBe(expected);
      expect(wrong.stdout()).toBe("");

      const cli = spawnNode(["src/cli.ts", "workspace", "create", "--name", "Wrong Key Co"], {
        DATA_DIR: dataDir,
        LOG_LEVEL: "warn",
        MASTER_KEY: keyB,
      });
      expect(await waitForExit(cli, 60_000)).toEqual({ code: 2, signal: null });
      expect(cli.stderr()).toBe(expected.replace("Configuration error: ", ""));
      expect(cli.stdout()).toBe("");

      // The right key still starts and reads what it wrote.
      const again = await startServer(dataDir, { MASTER_KEY: keyA });
      const ws = await callService<{ workspace: WorkspaceJson }>(
        again,
        "GET",
        `/api/v1/workspaces/${created.json.workspace.id}`,
        created.json.apiKeys.test.key,
      );
      expect(ws.status).toBe(200);
      expect(await stopServer(again), `stderr: ${again.stderr()}`).toEqual({ code: 0, signal: null });
    },
    TEST_TIMEOUT_MS,
  );

  it.skipIf(!process.env.DATABASE_URL)(
    "on PostgreSQL: a second instance with another MASTER_KEY refuses while the first serves on; one with the same key joins",
    async () => {
      const base = process.env.DATABASE_URL as string;
      const name = `test_${randomBytes(16).toString("hex")}`;
      const admin = async (statement: string) => {
        const client = new pg.Client({ connectionString: base });
        await client.connect();
        try {
          await client.query(statement);
        } finally {
          await client.end();
        }
      };
      await admin(`CREATE DATABASE ${name}`);
      try {
        const url = new URL(base);
        url.pathname = `/${name}`;
        const keyA = randomBytes(32).toString("hex");
        const onServer = (key: string) => ({ DATABASE_URL: url.toString(), MASTER_KEY: key });
        const first = await startServer(freshDataDir(), onServer(keyA));
        const created = await callService<CreatedWorkspaceJson>(first, "POST", "/api/v1/workspaces", ADMIN, {
          name: "Shared Co",
        });
        expect(created.status).toBe(201);

        const wrong = spawnNode(["src/main.ts"], {
          PORT: String(await freePort()),
          HOST: "127.0.0.1",
          DATA_DIR: freshDataDir(),
          LOG_LEVEL: "warn",
          ...onServer(randomBytes(32).toString("hex")),
        });
        expect(await waitForExit(wrong, 60_000)).toEqual({ code: 2, signal: null });
        expect(wrong.stderr()).toBe(
          "Configuration error: MASTER_KEY does not match the key this database's secrets were encrypted with\n",
        );

        const second = await startServer(freshDataDir(), onServer(keyA));
        for (const server of [first, second]) {
          const read = await callService(
            server,
            "GET",
            `/api/v1/workspaces/${created.json.workspace.id}`,
            ADMIN,
          );
          expect(read.status).toBe(200);
        }
        for (const server of [first, second]) expect((await stopServer(server)).code).toBe(0);
      } finally {
        await stopAllServices();
        await admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      }
    },
    TEST_TIMEOUT_MS,
  );

  embeddedIt(
    "refuses DATABASE_URL without MASTER_KEY before connecting anywhere",
    async () => {
      const spawned = spawnNode(["src/main.ts"], {
        PORT: String(await freePort()),
        HOST: "127.0.0.1",
        DATA_DIR: freshDataDir(),
        LOG_LEVEL: "warn",
        DATABASE_URL: "postgres://svc@127.0.0.1:9/payments",
      });
      expect(await waitForExit(spawned, 30_000)).toEqual({ code: 2, signal: null });
      expect(spawned.stderr()).toMatch(
        /^Configuration error: MASTER_KEY is required when DATABASE_URL is set/,
      );
      expect(spawned.stderr().trim().split("\n")).toHaveLength(1);
    },
    TEST_TIMEOUT_MS,
  );
});

describe("sandbox and live on one chain (D21)", () => {
  embeddedIt(
    "refuses to start: one line naming both variables, exit 2, the RPC URL not printed",
    async () => {
      const network = (p: string, chainId: string): Record<string, string> => ({
        [`${p}_RPC_URL`]: "http://127.0.0.1:9/v2/rpc-secret-key-0123456789",
        [`${p}_CHAIN_ID`]: chainId,
        [`${p}_USDC_ADDRESS`]: `0x${"1".repeat(40)}`,
        [`${p}_ADAO_ADDRESS`]: `0x${"2".repeat(40)}`,
        [`${p}_TREASURY_ADDRESS`]: `0x${"3".repeat(40)}`,
      });
      for (const [sandboxChain, message] of [
        ["31337", /^Configuration error: SANDBOX_CHAIN_ID and LIVE_CHAIN_ID name the same chain \(31337\)/],
        ["84532", /^Configuration error: SANDBOX_RPC_URL and LIVE_RPC_URL point at the same node/],
      ] as const) {
        const spawned = spawnNode(["src/main.ts"], {
          PORT: String(await freePort()),
          HOST: "127.0.0.1",
          DATA_DIR: freshDataDir(),
          LOG_LEVEL: "warn",
          ...network("SANDBOX", sandboxChain),
          ...network("LIVE", "31337"),
        });
        expect(await waitForExit(spawned, 30_000)).toEqual({ code: 2, signal: null });
        expect(spawned.stderr()).toMatch(message);
        expect(spawned.stderr()).not.toContain("rpc-secret-key");
        expect(spawned.stderr().trim().split("\n")).toHaveLength(1);
      }
    },
    TEST_TIMEOUT_MS,
  );
});

describe("the CLI", () => {
  embeddedIt(
    "`workspace create` prints the admin endpoint's JSON and its test key works against the server",
    async () => {
      const dataDir = freshDataDir();
      // A first user has no admin secret: the CLI must not need one.
      const cli = spawnNode(["src/cli.ts", "workspace", "create", "--name", "CliCo", "--email", "a@b.co"], {
        DATA_DIR: dataDir,
        LOG_LEVEL: "warn",
      });
      const cliExit = await waitForExit(cli, 90_000);
      expect(cliExit, `stderr: ${cli.stderr()}`).toEqual({ code: 0, signal: null });

      let parsed: unknown;
      expect(() => {
        parsed = JSON.parse(cli.stdout());
      }, `stdout is JSON: ${cli.stdout()}`).not.toThrow();
      const printed = parsed as CreatedWorkspaceJson;
      expect(printed.workspace).toMatchObject({
        name: "CliCo",
        settlement_address: null,
        defaultWalletType: "workspace",
        smartWallet: null,
      });
      expect(printed.workspace.id).toMatch(/^[0-9a-f-]{36}$/i);
      expect(printed.workspace.eoa.address).toMatch(/^0x[0-9a-fA-F]{40}$/);
      expect(printed.apiKeys.test).toMatchObject({ environment: "sandbox" });
      expect(printed.apiKeys.live).toMatchObject({ environment: "live" });
      expect(printed.apiKeys.test.key).toMatch(/^svc_test_[0-9A-Za-z]{32,}$/);
      expect(printed.apiKeys.live.key).toMatch(/^svc_live_[0-9A-Za-z]{32,}$/);
      expect(printed.apiKeys.test.prefix).toBe(printed.apiKeys.test.key.slice(0, 12));
      expect(existsSync(join(dataDir, "master.key"))).toBe(true);
      expect(statSync(join(dataDir, "master.key")).mode & 0o777).toBe(0o600);

      const server = await startServer(dataDir);
      const testKey: string = printed.apiKeys.test.key;
      const ws = await callService<{ workspace: WorkspaceJson }>(
        server,
        "GET",
        `/api/v1/workspaces/${printed.workspace.id}`,
        testKey,
      );
      expect(ws.status).toBe(200);
      expect(ws.json.workspace).toMatchObject({ id: printed.workspace.id, name: "CliCo" });
      expect(ws.json.workspace.eoa.address).toBe(printed.workspace.eoa.address);
      expect(ws.headers.get("x-ratelimit-limit")).toBeTruthy();

      const keys = await callService<{ apiKeys: Array<{ id: string }> }>(
        server,
        "GET",
        "/api/v1/keys",
        testKey,
      );
      expect(keys.status).toBe(200);
      expect(keys.json.apiKeys.map((k: { id: string }) => k.id)).toContain(printed.apiKeys.test.id);

      const payment = await callService(server, "POST", "/api/v1/payments", testKey, {
        tokenSymbol: "USDC",
        amount: "10",
        merchantWallet: MERCHANT,
      });
      expect(payment.status).toBe(201);

      const live = await callService(
        server,
        "GET",
        `/api/v1/workspaces/${printed.workspace.id}`,
        printed.apiKeys.live.key,
      );
      expect(live.status).toBe(200);

      // "Prints the same JSON as the admin endpoint": same fields at every level.
      const viaHttp = await callService<CreatedWorkspaceJson>(server, "POST", "/api/v1/workspaces", ADMIN, {
        name: "HttpCo",
        adminEmail: "c@d.co",
      });
      expect(viaHttp.status).toBe(201);
      const keysOf = (value: object) => Object.keys(value).sort();
      expect(keysOf(printed)).toEqual(keysOf(viaHttp.json));
      expect(keysOf(printed.workspace)).toEqual(keysOf(viaHttp.json.workspace));
      expect(keysOf(printed.workspace.eoa)).toEqual(keysOf(viaHttp.json.workspace.eoa));
      expect(keysOf(printed.apiKeys)).toEqual(keysOf(viaHttp.json.apiKeys));
      expect(keysOf(printed.apiKeys.test)).toEqual(keysOf(viaHttp.json.apiKeys.test));
      expect(keysOf(printed.apiKeys.live)).toEqual(keysOf(viaHttp.json.apiKeys.live));

      const exit = await stopServer(server);
      expect(exit, `stderr: ${server.stderr()}`).toEqual({ code: 0, signal: null });
    },
    TEST_TIMEOUT_MS,
  );

  embeddedIt(
    "`workspace set-password` reads the password from standard input, and the dashboard then signs in with it",
    async () => {
      const dataDir = freshDataDir();
      const env = { DATA_DIR: dataDir, LOG_LEVEL: "warn" };
      const cli = spawnNode(
        ["src/cli.ts", "workspace", "create", "--name", "SetCo", "--email", "set@co.test"],
        env,
      );
      expect(await waitForExit(cli, 90_000), `stderr: ${cli.stderr()}`).toEqual({ code: 0, signal: null });
      const id = (JSON.parse(cli.stdout()) as CreatedWorkspaceJson).workspace.id;

      const short = spawnNode(["src/cli.ts", "workspace", "set-password", "--workspace", id], env, "short\n");
      expect((await waitForExit(short, 60_000)).code).toBe(2);
      expect(short.stderr()).toContain("password must be 12 to 200 characters");
      const unknown = spawnNode(
        ["src/cli.ts", "workspace", "set-password", "--workspace", "00000000-0000-4000-8000-000000000000"],
        env,
        "a long dashboard password\n",
      );
      expect((await waitForExit(unknown, 60_000)).code).toBe(2);
      expect(unknown.stderr()).toContain("Workspace not found");
      const set = spawnNode(
        ["src/cli.ts", "workspace", "set-password", "--workspace", id],
        env,
        "a long dashboard password\n",
      );
      expect(await waitForExit(set, 60_000), `stderr: ${set.stderr()}`).toEqual({ code: 0, signal: null });
      expect(set.stdout()).toContain(
        `Password set for workspace ${id}; its dashboard sessions are signed out.`,
      );
      // The password never reaches the output.
      expect(set.stdout() + set.stderr()).not.toContain("a long dashboard password");

      const server = await startServer(dataDir);
      const form = await fetch(`${server.baseUrl}/dashboard/login`);
      const loginCookie = (form.headers.get("set-cookie") ?? "").split(";")[0] ?? "";
      const token = /name="_csrf" value="([^"]+)"/.exec(await form.text())?.[1] ?? "";
      const login = await fetch(`${server.baseUrl}/dashboard/login`, {
        method: "POST",
        redirect: "manual",
        headers: { cookie: loginCookie, "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({
          email: "set@co.test",
          password: "a long dashboard password",
          _csrf: token,
        }),
      });
      expect(login.status).toBe(303);
      const session = /svc_session=[^;]+/.exec(login.headers.get("set-cookie") ?? "")?.[0] ?? "";
      expect(login.headers.get("set-cookie")).toMatch(/svc_session=[^;]+;.*HttpOnly/);
      const overview = await fetch(`${server.baseUrl}/dashboard/sandbox`, {
        headers: { cookie: session },
        redirect: "manual",
      });
      expect(overview.status).toBe(200);
      expect(await stopServer(server), `stderr: ${server.stderr()}`).toEqual({ code: 0, signal: null });

      // Setting the password again from the command line signs every session out.
      const reset = spawnNode(
        ["src/cli.ts", "workspace", "set-password", "--workspace", id],
        env,
        "another long password\n",
      );
      expect(await waitForExit(reset, 60_000), `stderr: ${reset.stderr()}`).toEqual({
        code: 0,
        signal: null,
      });
      const again = await startServer(dataDir);
      const signedOut = await fetch(`${again.baseUrl}/dashboard/sandbox`, {
        headers: { cookie: session },
        redirect: "manual",
      });
      expect(signedOut.status).toBe(303);
      expect(signedOut.headers.get("location")).toBe("/dashboard/login");
      const exit = await stopServer(again);
      expect(exit, `stderr: ${again.stderr()}`).toEqual({ code: 0, signal: null });
    },
    TEST_TIMEOUT_MS,
  );

  embeddedIt(
    "exits non-zero with usage when --name is missing, creating nothing",
    async () => {
      const dataDir = freshDataDir();
      const cli = spawnNode(["src/cli.ts", "workspace", "create", "--email", "a@b.co"], {
        DATA_DIR: dataDir,
        LOG_LEVEL: "warn",
      });
      const exit = await waitForExit(cli, 30_000);
      expect(exit.code).not.toBe(0);
      expect(exit.code).not.toBeNull();
      expect(cli.stderr()).toContain("--name");
      expect(cli.stdout()).toBe("");
    },
    TEST_TIMEOUT_MS,
  );
});
