import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, renameSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort } from "../../src/devnet/chain.ts";
import { callService, cleanEnv, type Exit } from "../support/service-process.ts";

// A newcomer's first minutes (issue 21): a fresh clone of the committed HEAD, a Node.js 20 first
// on PATH (the registry's `node@20` package) and nothing installed. The README's run command
// (parsed from its Quick start block) must install what it needs, Node.js 24 included, serve
// the API and take a sandbox payment; the tree must then be as an install under Node.js 24 leaves
// it, and `npm run devnet` must start from that clone. The spawned commands talk to the npm
// registry (installs) and to 127.0.0.1 only.

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const NODE20_PREFIX = join(tmpdir(), "payments-fresh-clone-node-20");
const NODE20_BIN = join(NODE20_PREFIX, "node_modules", "node", "bin");
const MERCHANT = "0x1111111111111111111111111111111111111111";
/** The first run installs Node.js 24 and every dependency (1–3 min, longer beside the other suites). */
const FIRST_RUN_MS = 480_000;
const DEVNET_START_MS = 120_000;
const STOP_MS = 60_000;

const HAS_GIT = spawnSync("git", ["--version"]).status === 0;
// The PostgreSQL pass re-runs test/: this test is about the embedded default.
const SKIP = Boolean(process.env.DATABASE_URL) || !HAS_GIT;
if (!HAS_GIT) console.warn("fresh-clone test skipped: git is not installed");

function versionOf(binary: string): string | undefined {
  const run = spawnSync(binary, ["--version"], { encoding: "utf8" });
  return run.status === 0 ? run.stdout.trim() : undefined;
}

/** The npm the machine has: Debian's, else the first on PATH. */
function systemNpm(): string {
  if (existsSync("/usr/bin/npm")) return "/usr/bin/npm";
  const found = spawnSync("sh", ["-c", "command -v npm"], { encoding: "utf8" }).stdout.trim();
  if (!found) throw new Error("no npm on this machine");
  return found;
}

/** A Node.js 20 from the registry's `node@20` package, installed once under the OS temp dir. */
function node20(npm: string): string {
  const binary = join(NODE20_BIN, "node");
  if (versionOf(binary)?.startsWith("v20.")) return NODE20_BIN;
  // Installed beside the cache and renamed into place, so that a run never sees half an install.
  const staging = `${NODE20_PREFIX}.${process.pid}.tmp`;
  rmSync(staging, { recursive: true, force: true });
  const args = ["install", "--prefix", staging, "--no-save", "--no-package-lock", "--no-audit", "--no-fund"];
  const install = spawnSync(npm, [...args, "--loglevel=error", "node@20"], {
    encoding: "utf8",
    env: npmFreeEnv(),
  });
  if (install.status !== 0) throw new Error(`npm install node@20 failed:\n${install.stderr}`);
  rmSync(NODE20_PREFIX, { recursive: true, force: true });
  try {
    renameSync(staging, NODE20_PREFIX);
  } catch (err) {
    // Another run put its own in place meanwhile: use that one.
    rmSync(staging, { recursive: true, force: true });
    if (!versionOf(binary)?.startsWith("v20.")) throw err;
  }
  return NODE20_BIN;
}

/**
 * The environment of a newcomer's shell: no npm_* settings of the npm that runs these tests, no
 * vitest variables, no path into this checkout's node_modules, and no variable that would choose
 * the service's database, key or ports (cleanEnv).
 */
function npmFreeEnv(): NodeJS.ProcessEnv {
  const env = cleanEnv();
  for (const name of Object.keys(env)) {
    if (/^(npm_|VITEST|NODE_OPTIONS$|NODE_ENV$|INIT_CWD$|DEVNET_|TEST$)/i.test(name)) delete env[name];
  }
  env.PATH = (env.PATH ?? "")
    .split(delimiter)
    .filter((dir) => dir !== "" && !dir.includes("node_modules"))
    .join(delimiter);
  return env;
}

/** The commands of the README's first Quick start code block, one per line (comments kept). */
function quickStartCommands(readme: string): string[] {
  const section = readme.split(/^## Quick start[ \t]*$/m)[1];
  if (section === undefined) throw new Error("README.md has no '## Quick start' section");
  const block = /^```[a-z]*\n([\s\S]*?)^```/m.exec(section);
  if (!block?.[1]) throw new Error("README.md's Quick start has no code block");
  return block[1].split("\n").filter((line) => line.trim() !== "" && !line.trim().startsWith("#"));
}

/** A shell command running in its own process group (stopped with everything it started). */
interface GroupProcess {
  child: ChildProcess;
  exited: Promise<Exit>;
  /** The last 50,000 characters written to stdout and stderr. */
  output: () => string;
}

const groups = new Set<number>();

function groupAlive(pid: number): boolean {
  try {
    process.kill(-pid, 0);
    return true;
  } catch {
    return false;
  }
}

function spawnGroup(command: string, cwd: string, env: NodeJS.ProcessEnv): GroupProcess {
  const child = spawn("/bin/sh", ["-c", command], {
    cwd,
    env,
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
  });
  if (child.pid === undefined) throw new Error(`could not start: ${command}`);
  groups.add(child.pid);
  let both = "";
  const collect = (chunk: Buffer) => {
    both = (both + chunk.toString("utf8")).slice(-50_000);
  };
  child.stdout?.on("data", collect);
  child.stderr?.on("data", collect);
  const exited = new Promise<Exit>((resolve) => {
    child.on("exit", (code, signal) => resolve({ code, signal }));
  });
  return { child, exited, output: () => both };
}

/** SIGTERM to the whole group, then waits until none of its processes is left. */
async function stopGroup(group: GroupProcess, ms = STOP_MS): Promise<Exit> {
  const pid = group.child.pid as number;
  if (groupAlive(pid)) process.kill(-pid, "SIGTERM");
  const exit = await group.exited;
  const deadline = Date.now() + ms;
  while (groupAlive(pid)) {
    if (Date.now() > deadline) {
      process.kill(-pid, "SIGKILL");
      throw new Error(`process group ${pid} still running ${ms} ms after SIGTERM\n${group.output()}`);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  groups.delete(pid);
  return exit;
}

/** Polls `check` every 500 ms until it returns a value, the process exits, or `ms` pass. */
async function pollUntil<T>(
  what: string,
  group: GroupProcess,
  ms: number,
  check: () => Promise<T | undefined>,
): Promise<T> {
  let exit: Exit | undefined;
  void group.exited.then((e) => {
    exit = e;
  });
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (exit) throw new Error(`${what}: the process exited early ${JSON.stringify(exit)}\n${group.output()}`);
    try {
      const value = await check();
      if (value !== undefined) return value;
    } catch {
      // not there yet
    }
    await new Promise((r) => setTimeout(r, 500));
  }
  throw new Error(`${what}: not within ${ms} ms\n${group.output()}`);
}

/** Hardhat's EDR native package for this machine (npm skips it under Node.js 20). */
function edrPackage(): string {
  const suffixes: Record<string, string> = { linux: "-gnu", win32: "-msvc" };
  const suffix = suffixes[process.platform] ?? "";
  return `@nomicfoundation/edr-${process.platform}-${process.arch}${suffix}`;
}

describe.skipIf(SKIP)("a fresh clone on Node.js 20, with the README's commands", () => {
  let clone: string;
  let env: NodeJS.ProcessEnv;
  let dataDir: string;

  beforeAll(() => {
    clone = mkdtempSync(join(tmpdir(), "payments-fresh-clone-"));
    const cloned = spawnSync("git", ["clone", "--quiet", ROOT, clone], { encoding: "utf8" });
    expect(cloned.status, cloned.stderr).toBe(0);
    expect(existsSync(join(clone, "node_modules"))).toBe(false);

    const npm = systemNpm();
    const base = npmFreeEnv();
    env = { ...base, PATH: [node20(npm), dirname(npm), base.PATH].join(delimiter) };
    dataDir = join(clone, "data");
    const onPath = spawnSync("node", ["--version"], { env, encoding: "utf8" });
    expect(onPath.stdout.trim()).toMatch(/^v20\./);
  }, 120_000);

  afterAll(async () => {
    for (const pid of groups) {
      try {
        process.kill(-pid, "SIGKILL");
      } catch {
        // already gone
      }
    }
    groups.clear();
    if (clone) rmSync(clone, { recursive: true, force: true });
  });

  it(
    "the README's run command installs everything under Node.js 24, serves the API and takes a payment",
    async () => {
      const [run] = quickStartCommands(readFileSync(join(clone, "README.md"), "utf8"));
      expect(run).toBeDefined();
      const secret = /\bADMIN_SECRET=(['"]?)([^\s'"]+)\1/.exec(run as string)?.[2];
      expect(secret, `no ADMIN_SECRET in the README's run command: ${run}`).toBeDefined();

      const port = await freePort();
      const service = spawnGroup(run as string, clone, {
        ...env,
        PORT: String(port),
        HOST: "127.0.0.1",
        DATA_DIR: dataDir,
      });
      const baseUrl = `http://127.0.0.1:${port}`;
      const health = await pollUntil("GET /health", service, FIRST_RUN_MS, async () => {
        const res = await fetch(`${baseUrl}/health`, { signal: AbortSignal.timeout(2_000) });
        return res.status === 200 ? await res.json() : undefined;
      });
      expect(health).toEqual({ status: "ok" });

      const created = await callService<{ apiKeys: { test: { key: string } } }>(
        { baseUrl },
        "POST",
        "/api/v1/workspaces",
        secret,
        { name: "Fresh Clone Co", settlementAddress: MERCHANT },
      );
      expect(created.status, JSON.stringify(created.json)).toBe(201);
      const payment = await callService<{ payment: { status: string } }>(
        { baseUrl },
        "POST",
        "/api/v1/payments",
        created.json.apiKeys.test.key,
        { tokenSymbol: "USDC", amount: "100.00", description: "Order from a fresh clone" },
      );
      expect(payment.status, JSON.stringify(payment.json)).toBe(201);
      expect(payment.json.payment.status).toBe("forwarded");

      await stopGroup(service);

      // The tree is as an install under Node.js 24 leaves it.
      const installedBy = JSON.parse(readFileSync(join(clone, "node_modules", ".installed-by.json"), "utf8"));
      expect(installedBy.node).toMatch(/^v24\./);
      expect(existsSync(join(clone, "node_modules", edrPackage()))).toBe(true);
    },
    FIRST_RUN_MS + 2 * STOP_MS,
  );

  it(
    "`npm run devnet` starts from that clone, still with Node.js 20 first on PATH",
    async () => {
      expect(
        existsSync(join(clone, "node_modules", ".installed-by.json")),
        "the first test installed nothing",
      ).toBe(true);
      const devnetPort = await freePort();
      const envFile = join(dataDir, "devnet.env");
      rmSync(envFile, { force: true });
      const devnet = spawnGroup("npm run devnet", clone, {
        ...env,
        DEVNET_PORT: String(devnetPort),
        DATA_DIR: dataDir,
      });
      const rpcUrl = `http://127.0.0.1:${devnetPort}`;
      const chainId = await pollUntil("devnet.env and eth_chainId", devnet, DEVNET_START_MS, async () => {
        if (!existsSync(envFile)) return undefined;
        const res = await fetch(rpcUrl, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_chainId", params: [] }),
          signal: AbortSignal.timeout(2_000),
        });
        const body = (await res.json()) as { result?: string };
        return body.result;
      });
      const written = readFileSync(envFile, "utf8");
      expect(written).toContain(`LIVE_RPC_URL=${rpcUrl}`);
      expect(written).toContain(`LIVE_CHAIN_ID=${Number(chainId)}`);
      // Two chains by default (D22): the second on the next port, with its own bundler.
      expect(written).toContain("LIVE_NETWORKS=default,devnet-b");
      expect(written).toContain(`LIVE_DEVNET_B_RPC_URL=http://127.0.0.1:${devnetPort + 1}`);
      expect(written).toContain("LIVE_DEVNET_B_CHAIN_ID=31338");
      expect(written).toMatch(/^LIVE_DEVNET_B_BUNDLER_URL=http:\/\/127\.0\.0\.1:[0-9]+$/m);
      expect(written).toMatch(/^LIVE_PAYMASTER_URL=http:\/\/127\.0\.0\.1:[0-9]+$/m);

      await stopGroup(devnet);
    },
    DEVNET_START_MS + 2 * STOP_MS,
  );
});
