import { type ChildProcess, spawn } from "node:child_process";
import { accessSync, constants } from "node:fs";
import { createConnection, createServer } from "node:net";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";

// A real redis-server on 127.0.0.1 for tests, without persistence. Stopping it (SIGTERM) and
// starting it again on the same port is how a Redis outage is simulated.

/** The redis-server binary on PATH (or /usr/bin), or undefined when it is not installed. */
export function findRedisServer(): string | undefined {
  const dirs = [...(process.env.PATH ?? "").split(delimiter), "/usr/bin", "/usr/local/bin"];
  for (const dir of dirs) {
    if (!dir) continue;
    const candidate = join(dir, "redis-server");
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {}
  }
  return undefined;
}

export async function freeLoopbackPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === "string") throw new Error("no port");
  return address.port;
}

function answersPing(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: "127.0.0.1", port });
    let reply = "";
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(500, () => done(false));
    socket.on("error", () => done(false));
    socket.on("connect", () => socket.write("PING\r\n"));
    socket.on("data", (chunk) => {
      reply += chunk.toString();
      if (reply.includes("\r\n")) done(reply.startsWith("+PONG"));
    });
  });
}

export class RedisServer {
  readonly port: number;
  readonly #binary: string;
  #process: ChildProcess | undefined;

  constructor(binary: string, port: number) {
    this.#binary = binary;
    this.port = port;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  async start(): Promise<void> {
    const args = ["--port", String(this.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"];
    this.#process = spawn(this.#binary, [...args, "--dir", tmpdir()], { stdio: "ignore" });
    const deadline = Date.now() + 10_000;
    while (!(await answersPing(this.port))) {
      if (this.#process.exitCode !== null) throw new Error(`redis-server exited (${this.#process.exitCode})`);
      if (Date.now() > deadline) throw new Error(`redis-server did not answer on port ${this.port}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  /** SIGSTOP / SIGCONT: a Redis that keeps its connections open and answers nothing. */
  freeze(): void {
    this.#process?.kill("SIGSTOP");
  }

  thaw(): void {
    this.#process?.kill("SIGCONT");
  }

  /** SIGTERM, and wait until it has exited. */
  async stop(): Promise<void> {
    const child = this.#process;
    this.#process = undefined;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
    child.kill("SIGTERM");
    await exited;
  }
}
