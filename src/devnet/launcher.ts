import { spawn } from "node:child_process";
import { createServer } from "node:net";

// The one way the devnet runs a child process (the Hardhat node, the Alto bundler): spawn a Node
// CLI, drain its output, poll until it answers or a deadline passes, and stop it with SIGTERM, then
// SIGKILL. A port found free may be taken before the child binds it, so a launch on a port of our
// choosing is retried when the child reports the port in use.

export interface NodeExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** The child exited before answering and its output says its port was taken. */
export class PortInUseError extends Error {}

/** How to run one attempt on a given port. */
export interface LaunchSpec<T> {
  /** Named in error messages, e.g. "the Hardhat node", "Alto". */
  name: string;
  /** The CLI script and its arguments; run with this Node (not through npx) so that the PID is the child's. */
  args: string[];
  cwd: string;
  env: NodeJS.ProcessEnv;
  /** Where the child answers; named in the timeout message. */
  url: string;
  /** How long to wait for the child to answer. Default 30 s. */
  startTimeoutMs?: number;
  /** Receives the child's stdout/stderr. Dropped when omitted. */
  onOutput?: (text: string) => void;
  /**
   * One readiness check: what the child answered once it is ready, undefined until then (not
   * listening yet included). A rejection ends the launch: the child answered, but wrongly.
   */
  probe: () => Promise<T | undefined>;
  /** Runs once the child has exited on stop (e.g. removes its private directory). */
  cleanup?: () => Promise<void>;
}

export interface Launched<T> {
  pid: number;
  /** The spec's URL, on the port the child got. */
  url: string;
  /** What the probe answered. */
  ready: T;
  /** Milliseconds from the start of the successful attempt (its preparation included) to its answer. */
  startMs: number;
  /** Resolves when the child has exited, for whatever reason. */
  exited: Promise<NodeExit>;
  /** SIGTERM, SIGKILL after 5 s; resolves once the child has exited and been cleaned up. Idempotent. */
  stop(): Promise<void>;
}

export interface LaunchOptions {
  /** A fixed port: no retry when it is taken. A free one on `freeOn` when omitted. */
  port?: number;
  /** The host the child binds, to look for a free port on. */
  freeOn: string;
}

const ATTEMPTS = 3;
const POLL_MS = 50;
const KILL_AFTER_MS = 5000;

/**
 * Starts a child with the spec that `prepare` gives for a port, and resolves once its probe
 * answers. On a port of our choosing taken meanwhile (PortInUseError), tries again on another.
 */
export async function launch<T>(
  options: LaunchOptions,
  prepare: (port: number) => Promise<LaunchSpec<T>>,
): Promise<Launched<T>> {
  for (let attempt = 1; ; attempt++) {
    const port = options.port ?? (await freePort(options.freeOn));
    const started = performance.now();
    try {
      return await launchOnce(await prepare(port), started);
    } catch (err) {
      if (options.port !== undefined || attempt >= ATTEMPTS || !(err instanceof PortInUseError)) throw err;
    }
  }
}

async function launchOnce<T>(spec: LaunchSpec<T>, started: number): Promise<Launched<T>> {
  const child = spawn(process.execPath, spec.args, {
    cwd: spec.cwd,
    stdio: ["ignore", "pipe", "pipe"],
    env: spec.env,
  });
  const exited = new Promise<NodeExit>((resolve) => {
    child.once("exit", (code, signal) => resolve({ code, signal }));
  });
  // A child may log a lot (the node logs every RPC call): always drain its pipes, or it blocks;
  // keep a tail for error messages.
  let tail = "";
  const onData = (chunk: Buffer) => {
    const text = chunk.toString("utf8");
    tail = (tail + text).slice(-4000);
    spec.onOutput?.(text);
  };
  child.stdout?.on("data", onData);
  child.stderr?.on("data", onData);
  let spawnError: Error | undefined;
  child.once("error", (err) => {
    spawnError = err;
  });
  // Never leave an orphaned child behind if this process exits without calling stop().
  const killOnExit = () => {
    child.kill("SIGKILL");
  };
  process.once("exit", killOnExit);

  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> => {
    stopping ??= (async () => {
      process.off("exit", killOnExit);
      if (child.exitCode === null && child.signalCode === null) {
        child.kill("SIGTERM");
        const force = setTimeout(() => child.kill("SIGKILL"), KILL_AFTER_MS);
        await exited;
        clearTimeout(force);
      }
      await spec.cleanup?.();
    })();
    return stopping;
  };

  // The name, fit to start a sentence ("the Hardhat node" -> "The Hardhat node").
  const title = spec.name.charAt(0).toUpperCase() + spec.name.slice(1);
  try {
    const deadline = Date.now() + (spec.startTimeoutMs ?? 30_000);
    let exitedEarly = false;
    void exited.then(() => {
      exitedEarly = true;
    });
    for (;;) {
      if (spawnError) throw new Error(`Cannot start ${spec.name}: ${spawnError.message}`);
      if (exitedEarly) {
        const message = `${title} exited before answering (code ${child.exitCode}, signal ${child.signalCode}):\n${tail.trim()}`;
        throw /EADDRINUSE|address already in use/i.test(tail)
          ? new PortInUseError(message)
          : new Error(message);
      }
      const ready = await spec.probe();
      if (ready !== undefined) {
        return {
          pid: child.pid as number,
          url: spec.url,
          ready,
          startMs: Math.round(performance.now() - started),
          exited,
          stop,
        };
      }
      if (Date.now() > deadline) {
        throw new Error(`${title} did not answer on ${spec.url} in time:\n${tail.trim()}`);
      }
      await new Promise((r) => setTimeout(r, POLL_MS));
    }
  } catch (err) {
    await stop();
    throw err;
  }
}

/** A port that is free on `host` right now (it may be taken before the caller binds it). */
export function freePort(host = "127.0.0.1"): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, host, () => {
      const address = server.address();
      server.close(() => {
        if (address && typeof address === "object") resolve(address.port);
        else reject(new Error("Could not find a free port"));
      });
    });
  });
}
