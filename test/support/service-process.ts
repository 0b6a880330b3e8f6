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
      /^(DATABASE_URL|MASTER_KEY|REDIS_URL|NETWORK_ENV_FILE|PUBLIC_BASE_URL|ROLE|SMTP_URL|ADMIN_SECRET|PORT|HOST|DATA_DIR|LOG_LEVEL|WEBHOOK_ALLOW_PRIVATE)$/.test(
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

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface NodeProcess {
  child: ChildProcess;
  exited: Promise<Exit>;
  /** All the process wrote to stdout, and to stderr (whole: tests count log lines and match messages). */
  stdout: () => string;
  stderr: () => string;
  /** The last 50,000 characters the process wrote to either (its log lines and errors). */
  output: () => string;
}

/**
 * Runs `node <args>` in the repository (or in `sourceDir`, another release's tree) with `env` on
 * top of a clean environment; `input`, when given, is written to its standard input, which is
 * then closed.
 */
export function spawnNode(
  args: string[],
  env: Record<string, string>,
  input?: string,
  sourceDir: string = ROOT,
): NodeProcess {
  const child = spawn(process.execPath, args, {
    cwd: sourceDir,
    env: { ...cleanEnv(), ...env },
    stdio: [input === undefined ? "ignore" : "pipe", "pipe", "pipe"],
  });
  if (input !== undefined) child.stdin?.end(input);
  running.add(child);
  let out = "";
  let err = "";
  let both = "";
  child.stdout?.on("data", (chunk: Buffer) => {
    const text = chunk.toString("utf8");
    out += text;
    both = (both + text).slice(-50_000);
  });
  child.stderr?.on("data", (chunk: Buffer) => {
    const text = chunk.toString("utf8");
    err += text;
    both = (both + text).slice(-50_000);
  });
  const exited = new Promise<Exit>((resolve) => {
    child.on("exit", (code, signal) => {
      running.delete(child);
      resolve({ code, signal });
    });
  });
  return { child, exited, stdout: () => out, stderr: () => err, output: () => both };
}

export interface ServiceProcess extends NodeProcess {
  baseUrl: string;
  /** The JSON of the /health answer (200) that found the service up. */
  health: unknown;
}

export interface StartOptions {
  /**
   * The tree whose `src/main.ts` runs (default: this repository): another release's, extracted
   * with its `node_modules` linked in (test/support/release-tree.ts).
   */
  sourceDir?: string;
}

/**
 * Starts `node src/main.ts` with `env` (on top of a clean environment, HOST=127.0.0.1 and
 * LOG_LEVEL=warn; DATA_DIR, ADMIN_SECRET and the like come in `env`) and waits for /health.
 */
export async function startService(
  env: Record<string, string>,
  options: StartOptions = {},
): Promise<ServiceProcess> {
  const port = await freePort();
  const spawned = spawnNode(
    ["src/main.ts"],
    {
      HOST: "127.0.0.1",
      LOG_LEVEL: "warn",
      // Webhook receivers of the tests listen on 127.0.0.1, a blocked destination otherwise (D21).
      WEBHOOK_ALLOW_PRIVATE: "true",
      ...env,
      PORT: String(port),
    },
    undefined,
    options.sourceDir,
  );
  let exit: Exit | undefined;
  void spawned.exited.then((e) => {
    exit = e;
  });
  const baseUrl = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + START_TIMEOUT_MS;
  while (Date.now() < deadline) {
    if (exit) throw new Error(`service exited early: ${JSON.stringify(exit)}\noutput: ${spawned.output()}`);
    try {
      const res = await fetch(`${baseUrl}/health`, { signal: AbortSignal.timeout(2_000) });
      if (res.status === 200) return { ...spawned, baseUrl, health: await res.json() };
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  spawned.child.kill("SIGKILL");
  throw new Error(
    `service did not answer /health within ${START_TIMEOUT_MS} ms\noutput: ${spawned.output()}`,
  );
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

/** Stops every process started here (services and `spawnNode` runs) that is still running. */
export async function stopAllServices(signal: NodeJS.Signals = "SIGKILL"): Promise<void> {
  await Promise.all([...running].map((child) => stopService(child, signal)));
}

export type Json = Record<string, unknown>;

/**
 * One JSON request to a service process; `token`, if any, goes as the Bearer credential. The type
 * parameter states what the test expects to find (the test checks it); a body that is not JSON
 * comes back as `{ unparsed: text }`.
 */
export async function callService<T = Json>(
  service: { baseUrl: string },
  method: string,
  path: string,
  token?: string,
  body?: unknown,
  timeoutMs = 15_000,
): Promise<{ status: number; json: T; headers: Headers }> {
  const res = await fetch(`${service.baseUrl}${path}`, {
    method,
    headers: {
      ...(token === undefined ? {} : { authorization: `Bearer ${token}` }),
      ...(body === undefined ? {} : { "content-type": "application/json" }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(timeoutMs),
  });
  const text = await res.text();
  let json: T;
  try {
    json = JSON.parse(text) as T;
  } catch {
    json = { unparsed: text } as T;
  }
  return { status: res.status, json, headers: res.headers };
}
