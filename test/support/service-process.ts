import { type ChildProcess, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { freePort } from "../../src/devnet/chain.ts";

// The service as a real process (`node src/main.ts`), for tests that need several instances,
// signals (SIGSTOP, SIGKILL) or the process's own start-up. Every process started here is
// registered, so a test file stops them all in its afterAll/afterEach with `stopAllServices`.

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const START_TIMEOUT_MS = 60_000;

const running = new Set<ChildProcess>();

/** The parent's environment without anything that would change which database or key the child uses. */
export function cleanEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const name of Object.keys(env)) {
    if (
      /^(DATABASE_URL|MASTER_KEY|REDIS_URL|NETWORK_ENV_FILE|PUBLIC_BASE_URL|ROLE|SMTP_URL|ADMIN_SECRET|PORT|HOST|DATA_DIR|LOG_LEVEL)$/.test(
        name,
      ) ||
      name.startsWith("RATE_LIMIT_") ||
      name.startsWith("SANDBOX_") ||
      name.startsWith("LIVE_")
    ) {
      delete env[name];
    }
  }
  return env;
}

export interface ServiceProcess {
  child: ChildProcess;
  baseUrl: string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** The last 50,000 characters the process wrote (its log lines and errors). */
  output: () => string;
}

/** Starts `node src/main.ts` with `env` (on top of a clean environment) and waits for /health. */
export async function startService(env: Record<string, string>): Promise<ServiceProcess> {
  const port = await freePort();
  const child = spawn(process.execPath, ["src/main.ts"], {
    cwd: ROOT,
    env: { ...cleanEnv(), HOST: "127.0.0.1", LOG_LEVEL: "warn", ...env, PORT: String(port) },
    stdio: ["ignore", "pipe", "pipe"],
  });
  running.add(child);
  let err = "";
  const keep = (chunk: Buffer) => {
    err = (err + chunk.toString("utf8")).slice(-50_000);
  };
  child.stdout?.on("data", keep);
  child.stderr?.on("data", keep);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.on("exit", (code, signal) => {
      running.delete(child);
      resolve({ code, signal });
    });
  });
  let exit: unknown;
  void exited.then((e) => {
    exit = e;
  });
  const baseUrl = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + START_TIMEOUT_MS;
  while (Date.now() < deadline) {
    if (exit) throw new Error(`service exited early: ${JSON.stringify(exit)}\noutput: ${err}`);
    try {
      const res = await fetch(`${baseUrl}/health`, { signal: AbortSignal.timeout(2_000) });
      if (res.status === 200) return { child, baseUrl, exited, output: () => err };
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  child.kill("SIGKILL");
  throw new Error(`service did not answer /health within ${START_TIMEOUT_MS} ms\noutput: ${err}`);
}

/** Sends `signal` and waits for the process to exit (a stopped process is continued first). */
export async function stopService(child: ChildProcess, signal: NodeJS.Signals = "SIGTERM"): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  await new Promise<void>((resolve) => {
    child.once("exit", () => resolve());
    child.kill("SIGCONT");
    child.kill(signal);
  });
}

export async function stopAllServices(signal: NodeJS.Signals = "SIGKILL"): Promise<void> {
  await Promise.all([...running].map((child) => stopService(child, signal)));
}

export type Json = Record<string, unknown>;

/** One JSON request to a service process; `token` goes as the Bearer credential. */
export async function callService(
  service: ServiceProcess,
  method: string,
  path: string,
  token: string,
  body?: unknown,
  timeoutMs = 15_000,
): Promise<{ status: number; json: Json }> {
  const res = await fetch(`${service.baseUrl}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body === undefined ? {} : { "content-type": "application/json" }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(timeoutMs),
  });
  const text = await res.text();
  let json: Json;
  try {
    json = JSON.parse(text) as Json;
  } catch {
    json = { unparsed: text };
  }
  return { status: res.status, json };
}
