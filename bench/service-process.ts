import { type ChildProcess, execFile, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { freePort } from "../src/devnet/chain.ts";
import type { Cleanups } from "./support.ts";

// The service as the benches run it: a throw-away PostgreSQL (scripts/local-postgres.sh) and
// `node src/main.ts` as a child process on it, both stopped by the bench's cleanup steps; and the
// child processes themselves (bench/run.ts starts its baseline server the same way).

const execFileAsync = promisify(execFile);
const ROOT = resolve(import.meta.dirname, "..");
const PG_SCRIPT = join(ROOT, "scripts", "local-postgres.sh");
const HOST = "127.0.0.1";
const sleep = (ms: number) => new Promise<void>((done) => setTimeout(done, ms));
const quiet = () => {};

export interface PostgresServer {
  url: string;
  /** Its data folder (postmaster.pid there names its processes). */
  dir: string;
  /** Stops it and removes the folder now (else the bench's cleanup does). */
  stop: () => Promise<void>;
}

/** Starts a PostgreSQL server in a temporary folder. */
export async function startPostgresServer(
  name: string,
  steps: Cleanups,
  log: (message: string) => void,
): Promise<PostgresServer> {
  const dir = mkdtempSync(join(tmpdir(), `bench-${name}-pg-`));
  const port = await freePort();
  const stop = steps.defer("PostgreSQL server", async () => {
    // A server that is already down is fine to clean up after; anything else is said.
    await execFileAsync("bash", [PG_SCRIPT, "stop", dir]).catch((err: unknown) =>
      log(`stopping PostgreSQL in ${dir} failed: ${err instanceof Error ? err.message : String(err)}`),
    );
    rmSync(dir, { recursive: true, force: true });
  });
  log(`starting PostgreSQL in ${dir} on port ${port}`);
  const { stdout } = await execFileAsync("bash", [PG_SCRIPT, "start", dir, String(port)]);
  const url = stdout.trim().split("\n").pop()?.trim();
  if (!url?.startsWith("postgres")) throw new Error(`unexpected output of local-postgres.sh: ${stdout}`);
  return { url, dir, stop };
}

/** Starts a PostgreSQL server in a temporary folder; its URL. */
export async function startPostgres(
  name: string,
  steps: Cleanups,
  log: (message: string) => void,
): Promise<string> {
  return (await startPostgresServer(name, steps, log)).url;
}

/** A clean environment: nothing from the caller's shell (DATABASE_URL, REDIS_URL…) leaks in. */
export function cleanEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const key of ["PATH", "HOME", "TMPDIR", "LANG", "TZ"]) {
    const value = process.env[key];
    if (value !== undefined) env[key] = value;
  }
  return env;
}

export interface Child {
  name: string;
  pid: number;
  proc: ChildProcess;
  /** The last 40 lines the process wrote (stdout and stderr), for error messages. */
  tail: string[];
  /** Lines written in all: the service logs at warn, so anything here deserves a look. */
  lines: () => number;
  exited: Promise<void>;
  /** SIGTERM, SIGKILL after 20 s; also a cleanup step of the bench. */
  stop: () => Promise<void>;
}

export function isRunning(proc: ChildProcess): boolean {
  return proc.exitCode === null && proc.signalCode === null;
}

/** `node <args>` from the project's folder, stopped by the bench's cleanup when not before. */
export function startChild(
  name: string,
  args: string[],
  options: { env: Record<string, string>; steps: Cleanups; log?: (message: string) => void; ipc?: boolean },
): Child {
  const log = options.log ?? quiet;
  const proc = spawn(process.execPath, args, {
    cwd: ROOT,
    env: options.env,
    stdio: options.ipc ? ["ignore", "pipe", "pipe", "ipc"] : ["ignore", "pipe", "pipe"],
  });
  const exited = new Promise<void>((done) => {
    proc.once("exit", () => done());
    proc.once("error", () => done());
  });
  const stop = options.steps.defer(name, async () => {
    if (!isRunning(proc)) return;
    proc.kill("SIGTERM");
    const graceful = await Promise.race([exited.then(() => true), sleep(20_000).then(() => false)]);
    if (!graceful && isRunning(proc)) {
      log(`${name} did not stop within 20 s: SIGKILL`);
      proc.kill("SIGKILL");
      await exited;
    }
  });
  if (proc.pid === undefined) throw new Error(`could not start ${name}`);
  const tail: string[] = [];
  let count = 0;
  const keep = (chunk: Buffer) => {
    for (const line of chunk.toString("utf8").split("\n")) {
      if (line.trim() === "") continue;
      count++;
      tail.push(line.length > 2000 ? `${line.slice(0, 2000)}…` : line);
      if (tail.length > 40) tail.shift();
    }
  };
  proc.stdout?.on("data", keep);
  proc.stderr?.on("data", keep);
  return { name, pid: proc.pid, proc, tail, lines: () => count, exited, stop };
}

export function assertAlive(child: Child): void {
  if (isRunning(child.proc)) return;
  const { exitCode, signalCode } = child.proc;
  const how = signalCode ? `signal ${signalCode}` : `code ${exitCode}`;
  throw new Error(`${child.name} exited (${how}); its last output:\n${child.tail.join("\n") || "(none)"}`);
}

/** Polls `url` until it answers 2xx; its JSON. */
export async function waitForHealth(child: Child, url: string, timeoutMs = 90_000): Promise<unknown> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    assertAlive(child);
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(2_000) });
      if (res.ok) return await res.json();
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`${child.name} was not ready within ${timeoutMs / 1000} s`);
    await sleep(200);
  }
}

export interface Service {
  base: string;
  pid: number;
  proc: ChildProcess;
  /** The last 40 lines the service wrote (it logs at warn and above). */
  tail: string[];
}

/** Starts `node src/main.ts` on `databaseUrl` and waits until /health answers. */
export async function startService(
  name: string,
  steps: Cleanups,
  options: { databaseUrl: string; adminSecret: string; env?: Record<string, string> },
): Promise<Service> {
  const port = await freePort();
  const dataDir = mkdtempSync(join(tmpdir(), `bench-${name}-data-`));
  steps.defer("service data folder", async () => rmSync(dataDir, { recursive: true, force: true }));
  const env: Record<string, string> = {
    ...cleanEnv(),
    PORT: String(port),
    HOST,
    DATA_DIR: dataDir,
    ADMIN_SECRET: options.adminSecret,
    LOG_LEVEL: "warn",
    DATABASE_URL: options.databaseUrl,
    // A server database needs the key every instance shares (the service refuses to start without).
    MASTER_KEY: randomBytes(32).toString("hex"),
    ...options.env,
  };
  const child = startChild("service", ["src/main.ts"], { env, steps });
  const base = `http://${HOST}:${port}`;
  await waitForHealth(child, `${base}/health`);
  return { base, pid: child.pid, proc: child.proc, tail: child.tail };
}
