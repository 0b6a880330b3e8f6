import { type ChildProcess, execFile, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { freePort } from "../src/devnet/chain.ts";
import type { Cleanups } from "./support.ts";

// The service as the benches run it: a throw-away PostgreSQL (scripts/local-postgres.sh) and
// `node src/main.ts` as a child process on it, both stopped by the bench's cleanup steps.

const execFileAsync = promisify(execFile);
const ROOT = resolve(import.meta.dirname, "..");
const PG_SCRIPT = join(ROOT, "scripts", "local-postgres.sh");
const HOST = "127.0.0.1";
const sleep = (ms: number) => new Promise<void>((done) => setTimeout(done, ms));

/** Starts a PostgreSQL server in a temporary folder; its URL. */
export async function startPostgres(
  name: string,
  steps: Cleanups,
  log: (message: string) => void,
): Promise<string> {
  const pgDir = mkdtempSync(join(tmpdir(), `bench-${name}-pg-`));
  const port = await freePort();
  steps.defer("PostgreSQL server", async () => {
    // A server that is already down is fine to clean up after; anything else is said.
    await execFileAsync("bash", [PG_SCRIPT, "stop", pgDir]).catch((err: unknown) =>
      log(`stopping PostgreSQL in ${pgDir} failed: ${err instanceof Error ? err.message : String(err)}`),
    );
    rmSync(pgDir, { recursive: true, force: true });
  });
  log(`starting PostgreSQL in ${pgDir} on port ${port}`);
  const { stdout } = await execFileAsync("bash", [PG_SCRIPT, "start", pgDir, String(port)]);
  const url = stdout.trim().split("\n").pop()?.trim();
  if (!url?.startsWith("postgres")) throw new Error(`unexpected output of local-postgres.sh: ${stdout}`);
  return url;
}

export interface Service {
  base: string;
  proc: ChildProcess;
  /** The last 20 lines the service wrote (it logs at warn and above). */
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
  const env: Record<string, string> = {};
  for (const key of ["PATH", "HOME", "TMPDIR", "LANG", "TZ"]) {
    const value = process.env[key];
    if (value !== undefined) env[key] = value;
  }
  Object.assign(env, {
    PORT: String(port),
    HOST,
    DATA_DIR: dataDir,
    ADMIN_SECRET: options.adminSecret,
    LOG_LEVEL: "warn",
    DATABASE_URL: options.databaseUrl,
    // A server database needs the key every instance shares (the service refuses to start without).
    MASTER_KEY: randomBytes(32).toString("hex"),
    ...options.env,
  });
  const proc = spawn(process.execPath, ["src/main.ts"], {
    cwd: ROOT,
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  const exited = new Promise<void>((done) => proc.once("exit", () => done()));
  const alive = () => proc.exitCode === null && proc.signalCode === null;
  steps.defer("service", async () => {
    if (!alive()) return;
    proc.kill("SIGTERM");
    const graceful = await Promise.race([exited.then(() => true), sleep(20_000).then(() => false)]);
    if (!graceful && alive()) {
      proc.kill("SIGKILL");
      await exited;
    }
  });
  const tail: string[] = [];
  const keep = (chunk: Buffer) => {
    for (const line of chunk.toString("utf8").split("\n")) {
      if (line.trim() === "") continue;
      tail.push(line.slice(0, 2000));
      if (tail.length > 20) tail.shift();
    }
  };
  proc.stdout?.on("data", keep);
  proc.stderr?.on("data", keep);
  const base = `http://${HOST}:${port}`;
  const deadline = Date.now() + 90_000;
  for (;;) {
    if (!alive()) throw new Error(`the service exited; its last output:\n${tail.join("\n")}`);
    try {
      const res = await fetch(`${base}/health`, { signal: AbortSignal.timeout(2_000) });
      if (res.ok) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error("the service was not ready within 90 s");
    await sleep(200);
  }
  return { base, proc, tail };
}
