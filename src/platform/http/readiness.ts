import type { FastifyInstance } from "fastify";

// GET /ready for a load balancer: 200 only while everything the service needs answers (the
// database, and each configured chain RPC and bundler), else 503 naming what does not, so the
// balancer stops sending this instance traffic. GET /health stays liveness only (the process runs).

/** A check resolves when its dependency answered, and throws (or times out) when it did not. */
export type ReadinessChecks = Record<string, () => Promise<unknown>>;

const CHECK_TIMEOUT_MS = 2_000;

export function registerReadiness(
  http: FastifyInstance,
  checks: ReadinessChecks,
  describe: (err: unknown) => string,
): void {
  // A check still running (a hung RPC answers only at its client's own timeout) is joined, not
  // started again, so frequent polls never pile calls up on a dependency that does not answer.
  const running = new Map<string, Promise<unknown>>();
  const run = (name: string): Promise<unknown> => {
    let call = running.get(name);
    if (!call) {
      call = Promise.resolve()
        .then(() => checks[name]?.())
        .finally(() => running.delete(name));
      running.set(name, call);
    }
    return call;
  };
  http.get("/ready", { config: { auth: "none" }, schema: { hide: true } }, async (_request, reply) => {
    const names = Object.keys(checks);
    const results = await Promise.all(names.map((name) => outcome(() => run(name), describe)));
    const report = Object.fromEntries(names.map((name, i) => [name, results[i]]));
    const ready = results.every((r) => r === "ok");
    return reply.status(ready ? 200 : 503).send({ status: ready ? "ready" : "unavailable", checks: report });
  });
}

async function outcome(check: (() => Promise<unknown>) | undefined, describe: (err: unknown) => string) {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${CHECK_TIMEOUT_MS} ms`)), CHECK_TIMEOUT_MS);
  });
  try {
    await Promise.race([check?.(), timeout]);
    return "ok";
  } catch (err) {
    return `not answering: ${describe(err)}`;
  } finally {
    clearTimeout(timer);
  }
}
