import { buildApp } from "./app.ts";
import { openRuntime } from "./bootstrap.ts";
import { type Config, ConfigError, loadConfig } from "./config.ts";
import { urlScrubber } from "./platform/log/scrub.ts";
import { startMetricsServer } from "./platform/metrics/routes.ts";
import { createWorkers } from "./workers.ts";

// Process entry: config → database → app → listen; SIGTERM/SIGINT close the HTTP server first
// (in-flight requests finish), then the database, so PGlite's files are flushed cleanly.

/** Set once the configuration is read: the start-up failure line then hides its URLs' secrets too. */
let loadedConfig: Config | undefined;

async function main(): Promise<void> {
  const config = loadConfig();
  loadedConfig = config;
  const { database, secrets, newerMigrations } = await openRuntime(config);
  const app = await buildApp({ config, db: database.db, secrets });
  const log = app.http.log;
  if (newerMigrations.length > 0)
    log.warn(
      { migrations: newerMigrations },
      "the database has a newer release's migrations: this instance runs an older release (a rolling upgrade?)",
    );
  // Background work runs beside the API unless ROLE splits them (ARCHITECTURE.md).
  const workers = config.role === "api" ? undefined : createWorkers(app);
  // Every role has its metrics; a worker serves no API, so this listener is its only one.
  const metricsServer =
    config.metrics.port === undefined
      ? undefined
      : await startMetricsServer(app.metrics, config.metrics.host, config.metrics.port);

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, "shutting down");
    const force = setTimeout(() => {
      log.error("shutdown took longer than 20 s; exiting");
      process.exit(1);
    }, 20_000);
    force.unref();
    try {
      await app.http.close();
      await workers?.stop();
      await metricsServer?.close();
      await database.close();
      log.info("stopped");
      process.exit(0);
    } catch (err) {
      log.error({ err }, "error during shutdown");
      process.exit(1);
    }
  };
  process.on("SIGTERM", () => void stop("SIGTERM"));
  process.on("SIGINT", () => void stop("SIGINT"));

  if (config.role !== "worker") await app.http.listen({ port: config.port, host: config.host });
  workers?.start();
  log.info(
    {
      database: database.kind,
      dataDir: database.kind === "pglite" ? config.dataDir : undefined,
      metrics: metricsServer?.url,
    },
    `service ready at ${config.publicBaseUrl}`,
  );
}

// One line, no stack trace: a bad setting (also a MASTER_KEY that does not open this database's
// secrets) exits 2, anything else 1. An RPC URL in the message keeps its host only.
main().catch((err: unknown) => {
  const scrub = urlScrubber(loadedConfig);
  if (err instanceof ConfigError) {
    process.stderr.write(`Configuration error: ${scrub(err.message)}\n`);
    process.exit(2);
  }
  process.stderr.write(`Failed to start: ${scrub(err instanceof Error ? err.message : String(err))}\n`);
  process.exit(1);
});
