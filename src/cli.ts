import { parseArgs } from "node:util";
import pino from "pino";
import { openRuntime } from "./bootstrap.ts";
import { type Config, ConfigError, loadConfig } from "./config.ts";
import { AppError } from "./domain/errors.ts";
import { WorkspacesService } from "./modules/workspaces/service.ts";
import { InFlight } from "./platform/concurrency/in-flight.ts";
import { loggerOptions, urlScrubber } from "./platform/log/scrub.ts";
import { Metrics } from "./platform/metrics/metrics.ts";

// `npm run cli -- workspace create --name NAME [--email E] [--settlement-address 0x…] [--password P]`
// prints the same JSON as POST /api/v1/workspaces, for a first user with no ADMIN_SECRET.
// With the embedded database, stop the server first: PGlite allows one process per data folder.

const USAGE =
  "usage: npm run cli -- workspace create --name NAME [--email E] [--settlement-address 0x…] [--password P]";

/** Set once the configuration is read, so that a failure's message hides its URLs' secrets. */
let loadedConfig: Config | undefined;

async function main(argv: string[]): Promise<number> {
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      name: { type: "string" },
      email: { type: "string" },
      "settlement-address": { type: "string" },
      password: { type: "string" },
      help: { type: "boolean", short: "h" },
    },
  });
  if (values.help || positionals[0] !== "workspace" || positionals[1] !== "create") {
    process.stderr.write(`${USAGE}\n`);
    return values.help ? 0 : 2;
  }
  if (!values.name) {
    process.stderr.write(`--name is required\n${USAGE}\n`);
    return 2;
  }
  const config = loadConfig();
  loadedConfig = config;
  const { database, secrets } = await openRuntime(config);
  try {
    const service = new WorkspacesService({
      config,
      db: database.db,
      secrets,
      log: pino({ ...loggerOptions(config), level: "warn" }),
      networks: {},
      senders: {},
      now: () => new Date(),
      inFlight: new InFlight(),
      metrics: new Metrics(false),
    });
    const created = await service.create({
      name: values.name,
      adminEmail: values.email,
      settlementAddress: values["settlement-address"],
      adminPassword: values.password,
    });
    process.stdout.write(`${JSON.stringify(created, null, 2)}\n`);
    return 0;
  } finally {
    await database.close();
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    const scrub = urlScrubber(loadedConfig);
    if (err instanceof AppError || err instanceof ConfigError) {
      process.stderr.write(`${scrub(err.message)}\n`);
      process.exit(2);
    }
    process.stderr.write(`${scrub(err instanceof Error ? err.message : String(err))}\n`);
    process.exit(1);
  },
);
