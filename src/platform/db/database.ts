import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { PGlite } from "@electric-sql/pglite";
import { pg_trgm } from "@electric-sql/pglite/contrib/pg_trgm";
import { Kysely, PostgresDialect, sql } from "kysely";
import { type Migration, type MigrationProvider, Migrator } from "kysely/migration";
import { PGliteDialect } from "kysely-pglite-dialect";
import pg from "pg";
import * as foundation from "./migrations/001_foundation.ts";
import * as webhooks from "./migrations/002_webhooks.ts";
import * as cryptoRail from "./migrations/003_crypto_rail.ts";
import * as payouts from "./migrations/004_payouts.ts";
import * as cardEvents from "./migrations/005_card_events.ts";
import * as ledgerEntries from "./migrations/006_ledger_entries.ts";
import * as smartWallets from "./migrations/007_smart_wallets.ts";
import * as agents from "./migrations/008_agents_and_wallets.ts";
import * as rejectedTransactions from "./migrations/010_rejected_transactions.ts";
import * as observedTransfers from "./migrations/011_observed_transfers.ts";
import * as transferIdentity from "./migrations/012_transfer_identity.ts";
import * as ledgerDebitBalance from "./migrations/013_ledger_debit_balance.ts";
import * as cardSessionPartialIndex from "./migrations/014_card_session_partial_index.ts";
import * as masterKeyCheck from "./migrations/015_master_key_check.ts";
import * as onePayerPerNonce from "./migrations/016_one_payer_per_nonce.ts";
import * as payoutEndedNotice from "./migrations/017_payout_ended_notice.ts";
import * as payoutKeys from "./migrations/018_payout_keys_in_idempotency_records.ts";
import * as dashboardLogins from "./migrations/019_dashboard.ts";
import * as paymentTotals from "./migrations/020_payment_totals.ts";
import * as splits from "./migrations/021_splits.ts";
import * as refunds from "./migrations/022_refunds.ts";
import * as swaps from "./migrations/023_swaps.ts";
import * as onramp from "./migrations/024_onramp.ts";
import * as onrampReconcile from "./migrations/025_onramp_reconcile.ts";
import * as transferClaims from "./migrations/026_transfer_claims.ts";
import * as defaultWalletPerEnvironment from "./migrations/027_default_wallet_per_environment.ts";
import * as adminEmailChanges from "./migrations/028_admin_email_changes.ts";
import * as gasLimits from "./migrations/029_gas_limits.ts";
import * as settlementTransfers from "./migrations/030_settlement_transfers.ts";
import * as chainTransactionNetworks from "./migrations/031_chain_transaction_networks.ts";
import * as chainCursorNetworks from "./migrations/032_chain_cursor_networks.ts";
import * as moneyRecordNetworks from "./migrations/033_money_record_networks.ts";
import * as paymentTotalsNetworks from "./migrations/034_payment_totals_networks.ts";
import * as ledgerNetworks from "./migrations/035_ledger_networks.ts";
import * as paymentNetworks from "./migrations/036_payment_networks.ts";
import * as inboxChecks from "./migrations/037_inbox_checks.ts";
import * as cardRefundSource from "./migrations/038_card_refund_source.ts";
import * as inboxHeld from "./migrations/039_inbox_held.ts";
import * as x402 from "./migrations/040_x402.ts";
import * as agentPolicies from "./migrations/041_agent_policies.ts";
import * as webhookSecretRotation from "./migrations/042_webhook_secret_rotation.ts";
import * as checkoutBranding from "./migrations/043_checkout_branding.ts";
import * as paidAtCreation from "./migrations/044_paid_at_creation.ts";
import * as webhookBacklog from "./migrations/045_webhook_backlog.ts";
import * as webhookProbe from "./migrations/046_webhook_probe.ts";
import * as ledgerBalanceParts from "./migrations/047_ledger_balance_parts.ts";
import { registerSubscribe } from "./notices.ts";
import { PreparingClient } from "./preparing-client.ts";
import type { DatabaseSchema } from "./schema.ts";

export type Db = Kysely<DatabaseSchema>;

/**
 * How long a session may sit idle, in a transaction or holding a lock, before PostgreSQL ends it.
 * A session lock is held across at most one call to a node at a time (15 s timeout, 3 attempts).
 */
const SESSION_IDLE_LIMIT_MS = 60_000;

// Migrations are listed here rather than read from a folder so that the same list runs from
// `node src/main.ts`, the CLI and vitest without a file-system loader.
export const MIGRATIONS: Record<string, Migration> = {
  "001_foundation": foundation,
  "002_webhooks": webhooks,
  "003_crypto_rail": cryptoRail,
  "004_payouts": payouts,
  "005_card_events": cardEvents,
  "006_ledger_entries": ledgerEntries,
  "007_smart_wallets": smartWallets,
  "008_agents_and_wallets": agents,
  "010_rejected_transactions": rejectedTransactions,
  "011_observed_transfers": observedTransfers,
  "012_transfer_identity": transferIdentity,
  "013_ledger_debit_balance": ledgerDebitBalance,
  "014_card_session_partial_index": cardSessionPartialIndex,
  "015_master_key_check": masterKeyCheck,
  "016_one_payer_per_nonce": onePayerPerNonce,
  "017_payout_ended_notice": payoutEndedNotice,
  "018_payout_keys_in_idempotency_records": payoutKeys,
  "019_dashboard": dashboardLogins,
  "020_payment_totals": paymentTotals,
  "021_splits": splits,
  "022_refunds": refunds,
  "023_swaps": swaps,
  "024_onramp": onramp,
  "025_onramp_reconcile": onrampReconcile,
  "026_transfer_claims": transferClaims,
  "027_default_wallet_per_environment": defaultWalletPerEnvironment,
  "028_admin_email_changes": adminEmailChanges,
  "029_gas_limits": gasLimits,
  "030_settlement_transfers": settlementTransfers,
  "031_chain_transaction_networks": chainTransactionNetworks,
  "032_chain_cursor_networks": chainCursorNetworks,
  "033_money_record_networks": moneyRecordNetworks,
  "034_payment_totals_networks": paymentTotalsNetworks,
  "035_ledger_networks": ledgerNetworks,
  "036_payment_networks": paymentNetworks,
  "037_inbox_checks": inboxChecks,
  "038_card_refund_source": cardRefundSource,
  "039_inbox_held": inboxHeld,
  "040_x402": x402,
  "041_agent_policies": agentPolicies,
  "042_webhook_secret_rotation": webhookSecretRotation,
  "043_checkout_branding": checkoutBranding,
  "044_paid_at_creation": paidAtCreation,
  "045_webhook_backlog": webhookBacklog,
  "046_webhook_probe": webhookProbe,
  "047_ledger_balance_parts": ledgerBalanceParts,
};

class StaticMigrationProvider implements MigrationProvider {
  async getMigrations(): Promise<Record<string, Migration>> {
    return MIGRATIONS;
  }
}

export interface DatabaseOptions {
  /** postgres:// URL of a server; when absent, embedded PGlite is used. */
  databaseUrl?: string | undefined;
  /** Folder of the embedded database; absent → in memory (tests). */
  pgliteDir?: string | undefined;
  poolSize?: number;
  /** PostgreSQL: run repeated statements as named prepared statements (default true). */
  preparedStatements?: boolean;
}

export interface Database {
  db: Db;
  kind: "pglite" | "postgres";
  close(): Promise<void>;
}

export async function openDatabase(options: DatabaseOptions): Promise<Database> {
  if (options.databaseUrl) {
    const poolSize = options.poolSize ?? 10;
    const pool = serverPool(options.databaseUrl, poolSize, options.preparedStatements !== false);
    // Session locks hold a connection across network calls (wallet-lock.ts): a pool of their own,
    // so that many wallets sending at once never take the connections everything else needs.
    const locks = serverPool(options.databaseUrl, Math.max(2, Math.ceil(poolSize / 2)), false);
    const db = new Kysely<DatabaseSchema>({ dialect: new PostgresDialect({ pool }) });
    lockPools.set(db, locks);
    mainPools.set(db, pool);
    registerSubscribe(db, (channel, onNotice, onLost) =>
      listenOnServer(options.databaseUrl ?? "", channel, onNotice, onLost),
    );
    return {
      db,
      kind: "postgres",
      close: async () => {
        await db.destroy();
        await locks.end();
      },
    };
  }
  let client: PGlite;
  if (options.pgliteDir) {
    mkdirSync(options.pgliteDir, { recursive: true });
    client = new PGlite(options.pgliteDir, { extensions: { pg_trgm } });
  } else {
    client = new PGlite({ extensions: { pg_trgm } });
  }
  await client.waitReady;
  const db = new Kysely<DatabaseSchema>({ dialect: new PGliteDialect(client) });
  const embedded = client;
  registerSubscribe(db, async (channel, onNotice) => embedded.listen(channel, onNotice));
  return { db, kind: "pglite", close: () => db.destroy() };
}

function serverPool(url: string, max: number, preparedStatements: boolean): pg.Pool {
  const pool = new pg.Pool({
    connectionString: url,
    max,
    // A process that is stopped (SIGSTOP, a frozen VM) keeps its sessions, and with them the
    // locks it holds: the other instances would wait for it forever. PostgreSQL ends such a
    // session after this long, which releases its locks and rolls its transaction back; the
    // stopped process finds its connection gone when it resumes, and records nothing more.
    // Set per session, not as startup options, which some poolers refuse.
    onConnect: async (client) => {
      await client.query(
        `SELECT set_config('idle_in_transaction_session_timeout', '${SESSION_IDLE_LIMIT_MS}', false),
                set_config('idle_session_timeout', '${SESSION_IDLE_LIMIT_MS}', false)`,
      );
    },
    Client: preparedStatements ? PreparingClient : pg.Client,
  });
  // An idle client that errors (server restart) must not crash the process; the pool replaces it.
  pool.on("error", () => {});
  // Nor may one that is checked out, whose session the server ends between two queries (the
  // idle limits, a restart): the 'error' event would crash the process; the error reaches its
  // user through its next query instead, which fails, and the pool drops it when it comes back
  // (not queryable).
  pool.on("connect", (client) => client.on("error", () => {}));
  return pool;
}

const lockPools = new WeakMap<Db, pg.Pool>();

/**
 * The pool of session locks of a server database; undefined for an embedded (PGlite) one, which
 * belongs to one process: it has one connection, and no other instance can share it, so what
 * only needs ordering across instances needs no lock there.
 */
export function sessionLockPool(db: Db): pg.Pool | undefined {
  return lockPools.get(db);
}

/**
 * A session of its own listening on `channel` (a pooled one would be handed to others). It is not
 * ended for idleness like the pool's: listening is all it does.
 */
async function listenOnServer(
  url: string,
  channel: string,
  onNotice: (payload: string) => void,
  onLost: () => void,
): Promise<() => Promise<void>> {
  const client = new pg.Client({ connectionString: url });
  let stopping = false;
  const lost = () => {
    if (!stopping) onLost();
  };
  client.on("error", lost);
  client.on("end", lost);
  client.on("notification", (notice) => {
    if (notice.channel === channel) onNotice(notice.payload ?? "");
  });
  await client.connect();
  await client.query(`LISTEN ${client.escapeIdentifier(channel)}`);
  return async () => {
    stopping = true;
    await client.end();
  };
}

const mainPools = new WeakMap<Db, pg.Pool>();

/** The connections of a server database's pools (the metrics); none for an embedded one. */
export function poolStats(db: Db): Array<{ pool: string; total: number; idle: number; waiting: number }> {
  const stats = [];
  for (const [name, pools] of [
    ["main", mainPools],
    ["locks", lockPools],
  ] as const) {
    const pool = pools.get(db);
    if (pool)
      stats.push({ pool: name, total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount });
  }
  return stats;
}

export function pgliteDirFor(dataDir: string): string {
  return join(dataDir, "pgdata");
}

/**
 * Applies pending migrations. Kysely's migrator takes a lock, so concurrent starts are safe.
 *
 * A database a newer release has migrated further (a rolling upgrade, docs/operations.md) is left
 * as it is, and this code runs against it: every migration of this release is applied and the
 * database's others all come after them, which the expand/contract rule makes safe. Kysely's
 * migrator would refuse it ("previously executed migration … is missing"), so an older instance
 * restarted mid-roll would never start again. Answers the newer migrations' names (none when
 * this release migrated, or had nothing to do).
 */
export async function migrate(db: Db): Promise<{ newer: string[] }> {
  const ahead = await newerMigrations(db);
  if (ahead.length > 0) return { newer: ahead };
  const migrator = new Migrator({ db, provider: new StaticMigrationProvider() });
  const { error, results } = await migrator.migrateToLatest();
  const failed = results?.find((r) => r.status === "Error");
  if (!error && !failed) return { newer: [] };
  // A newer release migrated while this one waited for the migrator's lock.
  const since = await newerMigrations(db);
  if (since.length > 0) return { newer: since };
  const name = failed ? ` ${failed.migrationName}` : "";
  throw new Error(`database migration${name} failed: ${(error as Error)?.message ?? ""}`, { cause: error });
}

/** The applied migrations this release does not know, all after its own; throws if they are not. */
async function newerMigrations(db: Db): Promise<string[]> {
  const table = await sql<{
    name: string | null;
  }>`SELECT to_regclass('kysely_migration')::text AS name`.execute(db);
  if (!table.rows[0]?.name) return [];
  const applied = (await sql<{ name: string }>`SELECT name FROM kysely_migration`.execute(db)).rows.map(
    (row) => row.name,
  );
  const unknown = applied.filter((name) => !Object.hasOwn(MIGRATIONS, name));
  if (unknown.length === 0) return [];
  const own = Object.keys(MIGRATIONS);
  const last = own.toSorted().at(-1) ?? "";
  const missing = own.filter((name) => !applied.includes(name));
  const earlier = unknown.filter((name) => name <= last);
  if (missing.length > 0 || earlier.length > 0)
    throw new Error(
      `database migration failed: the database's migrations (${unknown.join(", ")}) are not a later ` +
        `release's on top of this one's${missing.length > 0 ? `; not applied here: ${missing.join(", ")}` : ""}`,
    );
  return unknown.sort();
}
