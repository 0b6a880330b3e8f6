import { type Kysely, sql } from "kysely";
import type { Environment } from "../../config.ts";
import { newestFirst } from "../../platform/db/page.ts";
import type { DatabaseSchema } from "../../platform/db/schema.ts";
import { idInScope } from "../../platform/db/scope.ts";

// SQL of agent and user wallets (agent_wallets). Every read is scoped to a workspace and
// environment except the chain watcher's, which follows all wallets of an environment.

type Db = Kysely<DatabaseSchema>;
type Scope = { workspaceId: string; environment: Environment };

export interface WalletRow {
  id: string;
  owner_id: string;
  type: string;
  address: string;
  currencies: string[];
  created_at: Date;
}

const WALLET_COLUMNS = ["id", "owner_id", "type", "address", "currencies", "created_at"] as const;

export async function insertWallet(
  trx: Db,
  scope: Scope,
  values: {
    ownerId: string;
    type: string;
    address: string;
    encryptedPrivateKey: string;
    currencies: readonly string[];
    createdAt: Date;
  },
): Promise<WalletRow> {
  return trx
    .insertInto("agent_wallets")
    .values({
      workspace_id: scope.workspaceId,
      environment: scope.environment,
      owner_id: values.ownerId,
      type: values.type,
      address: values.address,
      encrypted_private_key: values.encryptedPrivateKey,
      currencies: JSON.stringify(values.currencies),
      created_at: values.createdAt,
    })
    .returning(WALLET_COLUMNS)
    .executeTakeFirstOrThrow();
}

export async function findWallet(db: Db, scope: Scope, id: string): Promise<WalletRow | undefined> {
  return db.selectFrom("agent_wallets").select(WALLET_COLUMNS).where(idInScope(scope, id)).executeTakeFirst();
}

export interface WalletFilter {
  ownerId?: string | undefined;
  type?: string | undefined;
  currency?: string | undefined;
  limit: number;
  offset: number;
}

/** A page of the scope's wallets, newest first, and how many match in all. */
export async function listWallets(
  db: Db,
  scope: Scope,
  filter: WalletFilter,
): Promise<{ rows: WalletRow[]; total: number }> {
  let base = db
    .selectFrom("agent_wallets")
    .where("workspace_id", "=", scope.workspaceId)
    .where("environment", "=", scope.environment);
  if (filter.ownerId) base = base.where("owner_id", "=", filter.ownerId);
  if (filter.type) base = base.where("type", "=", filter.type);
  if (filter.currency) base = base.where(sql<boolean>`currencies @> ${JSON.stringify([filter.currency])}`);
  return newestFirst(
    base.select(WALLET_COLUMNS),
    base.select((eb) => eb.fn.countAll().as("total")),
    filter,
  );
}

export async function setCurrencies(trx: Db, id: string, currencies: readonly string[]): Promise<WalletRow> {
  return trx
    .updateTable("agent_wallets")
    .set({ currencies: JSON.stringify(currencies) })
    .where("id", "=", id)
    .returning(WALLET_COLUMNS)
    .executeTakeFirstOrThrow();
}

/** A wallet the chain watcher follows: a transfer into it becomes wallet.balance.updated. */
export interface WatchedWallet {
  id: string;
  address: string;
  workspaceId: string;
  currencies: string[];
}

export async function walletsOf(db: Db, environment: Environment): Promise<WatchedWallet[]> {
  const rows = await db
    .selectFrom("agent_wallets")
    .select(["id", "address", "workspace_id", "currencies"])
    .where("environment", "=", environment)
    .execute();
  return rows.map((r) => ({
    id: r.id,
    address: r.address,
    workspaceId: r.workspace_id,
    currencies: r.currencies,
  }));
}
