import { parseArgs } from "node:util";
import pino from "pino";
import { openRuntime } from "./bootstrap.ts";
import { Chains } from "./chain/chains.ts";
import { type Config, ConfigError, loadConfig } from "./config.ts";
import { AppError } from "./domain/errors.ts";
import { SessionsService } from "./modules/dashboard/sessions.ts";
import { NetworkDirectory } from "./modules/networks/directory.ts";
import { WorkspacesService } from "./modules/workspaces/service.ts";
import { InFlight } from "./platform/concurrency/in-flight.ts";
import { loggerOptions, urlScrubber } from "./platform/log/scrub.ts";
import { Metrics } from "./platform/metrics/metrics.ts";
import { PASSWORD_COST } from "./platform/secrets/hashing.ts";

// `npm run cli -- workspace create --name NAME [--email E] [--settlement-address 0x…] [--password P]`
// prints the same JSON as POST /api/v1/workspaces, for a first user with no ADMIN_SECRET.
// `npm run cli -- workspace set-password --workspace ID [--password P]` sets the dashboard
// password of a workspace (read from standard input when --password is not given, so that it
// stays out of the shell's history).
// With the embedded database, stop the server first: PGlite allows one process per data folder.

const USAGE = [
  "usage: npm run cli -- workspace create --name NAME [--email E] [--settlement-address 0x…] [--password P]",
  "       npm run cli -- workspace set-password --workspace ID [--password P]   (else read from stdin)",
].join("\n");

const COMMANDS = new Set(["create", "set-password"]);

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
      workspace: { type: "string" },
      help: { type: "boolean", short: "h" },
    },
  });
  const command = positionals[1] ?? "";
  if (values.help || positionals[0] !== "workspace" || !COMMANDS.has(command)) {
    process.stderr.write(`${USAGE}\n`);
    return values.help ? 0 : 2;
  }
  if (command === "create" && !values.name) {
    process.stderr.write(`--name is required\n${USAGE}\n`);
    return 2;
  }
  if (command === "set-password" && !values.workspace) {
    process.stderr.write(`--workspace is required\n${USAGE}\n`);
    return 2;
  }
  const password =
    command === "set-password" ? (values.password ?? (await readStdinLine())) : values.password;
  const config = loadConfig();
  loadedConfig = config;
  const { database, secrets } = await openRuntime(config);
  try {
    const context = {
      config,
      db: database.db,
      secrets,
      log: pino({ ...loggerOptions(config), level: "warn" }),
      chains: new Chains([]),
      directory: new NetworkDirectory(config),
      now: () => new Date(),
      inFlight: new InFlight(),
      metrics: new Metrics(false),
      passwordCost: PASSWORD_COST,
    };
    const service = new WorkspacesService(context);
    if (command === "set-password") {
      await service.setPassword(values.workspace ?? "", password ?? "");
      // The way back in after a compromise: no session opened with the old password survives.
      await new SessionsService(context).closeAll(values.workspace ?? "");
      process.stdout.write(
        `Password set for workspace ${values.workspace}; its dashboard sessions are signed out.\n`,
      );
      return 0;
    }
    const created = await service.create({
      name: values.name ?? "",
      adminEmail: values.email,
      settlementAddress: values["settlement-address"],
      adminPassword: password,
    });
    process.stdout.write(`${JSON.stringify(created, null, 2)}\n`);
    return 0;
  } finally {
    await database.close();
  }
}

/** The first line of standard input (a password piped in or typed), without its line break. */
async function readStdinLine(): Promise<string> {
  let text = "";
  for await (const chunk of process.stdin) {
    text += String(chunk);
    if (text.includes("\n")) break;
  }
  return text.split(/\r?\n/)[0] ?? "";
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
