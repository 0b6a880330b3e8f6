import { type Selectable, sql } from "kysely";
import { AGENT_PAYMENT_TRANSITIONS, RESERVING_STATUSES } from "../../domain/agent-payment-state.ts";
import { columnsOf } from "../../platform/db/columns.ts";
import type { Db } from "../../platform/db/database.ts";
import { newestFirst } from "../../platform/db/page.ts";
import type {
  AgentPaymentAuthorizationsTable,
  AgentWalletPoliciesTable,
} from "../../platform/db/schema-agents.ts";
import { idInScope, type TenantScope } from "../../platform/db/scope.ts";

// The SQL of agent wallets' spending policies and x402 payment authorizations (migration 041).
// Every read names its tenant; the caps' reservation is taken under the wallet's row lock
// (lockWallet), which a pay, an approval and a policy change of one wallet all take first.

export type PolicyRow = Selectable<AgentWalletPoliciesTable>;
export type AuthorizationRow = Selectable<AgentPaymentAuthorizationsTable>;

export const POLICY_COLUMNS = columnsOf<AgentWalletPoliciesTable>({
  wallet_id: true,
  workspace_id: true,
  environment: true,
  max_per_payment: true,
  daily: true,
  monthly: true,
  allowed_payees: true,
  allowed_origins: true,
  approval_above: true,
  created_at: true,
  updated_at: true,
});

export const AUTHORIZATION_COLUMNS = columnsOf<AgentPaymentAuthorizationsTable>({
  id: true,
  workspace_id: true,
  environment: true,
  wallet_id: true,
  payer: true,
  network: true,
  caip2: true,
  asset: true,
  currency: true,
  amount: true,
  pay_to: true,
  resource_url: true,
  resource_origin: true,
  payment_required: true,
  nonce: true,
  valid_after: true,
  valid_before: true,
  status: true,
  created_at: true,
  decided_at: true,
  tx_hash: true,
  payment_signature: true,
});

/** What a signature needs of a wallet, its key still encrypted. */
export interface SigningWallet {
  id: string;
  type: string;
  address: string;
  currencies: string[];
  encrypted_private_key: string;
}

/**
 * The tenant's wallet, locked until the transaction ends (FOR NO KEY UPDATE: inserts that refer to
 * it are not held up). Pays, approvals and policy changes of one wallet take this lock first, so the
 * caps' sums and the rows they count are never read by two of them at once, on any instance.
 */
export async function lockWallet(
  trx: Db,
  scope: TenantScope,
  id: string,
): Promise<SigningWallet | undefined> {
  return trx
    .selectFrom("agent_wallets")
    .select(["id", "type", "address", "currencies", "encrypted_private_key"])
    .where(idInScope(scope, id))
    .forNoKeyUpdate()
    .executeTakeFirst();
}

export async function findPolicy(db: Db, walletId: string): Promise<PolicyRow | undefined> {
  return db
    .selectFrom("agent_wallet_policies")
    .select(POLICY_COLUMNS)
    .where("wallet_id", "=", walletId)
    .executeTakeFirst();
}

export interface StoredPolicy {
  max_per_payment: Record<string, string> | null;
  daily: Record<string, string> | null;
  monthly: Record<string, string> | null;
  allowed_payees: string[] | null;
  allowed_origins: string[] | null;
  approval_above: Record<string, string> | null;
}

/** Sets the wallet's whole policy (a PUT): every field replaced, an absent one cleared. */
export async function savePolicy(
  trx: Db,
  scope: TenantScope,
  walletId: string,
  policy: StoredPolicy,
  at: Date,
): Promise<PolicyRow> {
  const json = (value: object | null) => (value === null ? null : JSON.stringify(value));
  const fields = {
    max_per_payment: json(policy.max_per_payment),
    daily: json(policy.daily),
    monthly: json(policy.monthly),
    allowed_payees: json(policy.allowed_payees),
    allowed_origins: json(policy.allowed_origins),
    approval_above: json(policy.approval_above),
    updated_at: at,
  };
  return trx
    .insertInto("agent_wallet_policies")
    .values({
      wallet_id: walletId,
      workspace_id: scope.workspaceId,
      environment: scope.environment,
      created_at: at,
      ...fields,
    })
    .onConflict((oc) => oc.column("wallet_id").doUpdateSet(fields))
    .returning(POLICY_COLUMNS)
    .executeTakeFirstOrThrow();
}

/**
 * What the wallet's authorizations of `currency` reserved or spent since `dayStart` and since
 * `monthStart` (RESERVING_STATUSES, by the time each was requested), in smallest units.
 */
export async function reservedSince(
  trx: Db,
  walletId: string,
  currency: string,
  dayStart: Date,
  monthStart: Date,
): Promise<{ today: bigint; thisMonth: bigint }> {
  const row = await trx
    .selectFrom("agent_payment_authorizations")
    .select([
      sql<string>`coalesce(sum(amount) FILTER (WHERE created_at >= ${dayStart}), 0)::text`.as("today"),
      sql<string>`coalesce(sum(amount), 0)::text`.as("this_month"),
    ])
    .where("wallet_id", "=", walletId)
    .where("currency", "=", currency)
    .where("status", "in", RESERVING_STATUSES)
    .where("created_at", ">=", monthStart)
    .executeTakeFirstOrThrow();
  return { today: BigInt(row.today), thisMonth: BigInt(row.this_month) };
}

export interface NewAuthorization {
  walletId: string;
  payer: string;
  network: string;
  caip2: string;
  asset: string;
  currency: string;
  amount: bigint;
  payTo: string;
  resourceUrl: string;
  resourceOrigin: string;
  paymentRequired: Record<string, unknown>;
  createdAt: Date;
}

/** Signed fields, set when an authorization is signed (at once, or on approval). */
export interface Signed {
  nonce: string;
  validAfter: Date;
  validBefore: Date;
  /** Kept (encrypted) for the agent to read when a person approved it. */
  encryptedSignature?: string;
}

/**
 * Records an authorization by the trigger that creates it (`issued`, signed: with `signed`; or
 * `held_for_approval`), its status from the transition table.
 */
export async function insertAuthorization(
  trx: Db,
  scope: TenantScope,
  trigger: "issued" | "held_for_approval",
  values: NewAuthorization,
  signed: Signed | null,
): Promise<AuthorizationRow> {
  return trx
    .insertInto("agent_payment_authorizations")
    .values({
      workspace_id: scope.workspaceId,
      environment: scope.environment,
      wallet_id: values.walletId,
      payer: values.payer,
      network: values.network,
      caip2: values.caip2,
      asset: values.asset,
      currency: values.currency,
      amount: values.amount,
      pay_to: values.payTo,
      resource_url: values.resourceUrl,
      resource_origin: values.resourceOrigin,
      payment_required: JSON.stringify(values.paymentRequired),
      status: AGENT_PAYMENT_TRANSITIONS[trigger].to,
      created_at: values.createdAt,
      ...(signed
        ? {
            nonce: signed.nonce,
            valid_after: signed.validAfter,
            valid_before: signed.validBefore,
            decided_at: values.createdAt,
          }
        : {}),
    })
    .returning(AUTHORIZATION_COLUMNS)
    .executeTakeFirstOrThrow();
}

/** One of the wallet's authorizations for the tenant; `forUpdate` locks it for a decision. */
export async function findAuthorization(
  db: Db,
  scope: TenantScope,
  walletId: string,
  id: string,
  forUpdate = false,
): Promise<AuthorizationRow | undefined> {
  let query = db
    .selectFrom("agent_payment_authorizations")
    .select(AUTHORIZATION_COLUMNS)
    .where(idInScope(scope, id))
    .where("wallet_id", "=", walletId);
  if (forUpdate) query = query.forUpdate();
  return query.executeTakeFirst();
}

/** A page of the wallet's authorizations, newest first, optionally of one status, and the total. */
export async function listAuthorizations(
  db: Db,
  scope: TenantScope,
  walletId: string,
  filter: { status?: string | undefined; limit: number; offset: number },
): Promise<{ rows: AuthorizationRow[]; total: number }> {
  let base = db
    .selectFrom("agent_payment_authorizations")
    .where("wallet_id", "=", walletId)
    .where("workspace_id", "=", scope.workspaceId)
    .where("environment", "=", scope.environment);
  if (filter.status) base = base.where("status", "=", filter.status);
  return newestFirst(
    base.select(AUTHORIZATION_COLUMNS),
    base.select((eb) => eb.fn.countAll().as("total")),
    filter,
  );
}

/** The tenant's authorizations of one status over all its wallets, newest first (the dashboard's queue). */
export async function listOfStatus(
  db: Db,
  scope: TenantScope,
  filter: { status: string; limit: number; offset: number },
): Promise<{ rows: AuthorizationRow[]; total: number }> {
  const base = db
    .selectFrom("agent_payment_authorizations")
    .where("workspace_id", "=", scope.workspaceId)
    .where("environment", "=", scope.environment)
    .where("status", "=", filter.status);
  return newestFirst(
    base.select(AUTHORIZATION_COLUMNS),
    base.select((eb) => eb.fn.countAll().as("total")),
    filter,
  );
}

/**
 * A person's decision on a waiting authorization (compare-and-set on the table's `from`): `approved`
 * with its signed fields, or `denied`; undefined when it was no longer waiting.
 */
export async function decideAuthorization(
  trx: Db,
  id: string,
  trigger: "approved" | "denied",
  at: Date,
  signed: Signed | null,
): Promise<AuthorizationRow | undefined> {
  const rule = AGENT_PAYMENT_TRANSITIONS[trigger];
  return trx
    .updateTable("agent_payment_authorizations")
    .set({
      status: rule.to,
      decided_at: at,
      ...(signed
        ? {
            nonce: signed.nonce,
            valid_after: signed.validAfter,
            valid_before: signed.validBefore,
            payment_signature: signed.encryptedSignature ?? null,
          }
        : {}),
    })
    .where("id", "=", id)
    .where("status", "=", rule.from)
    .returning(AUTHORIZATION_COLUMNS)
    .executeTakeFirst();
}

/** Authorized authorizations whose use is still to be seen, the soonest to lapse first. */
export async function openAuthorizations(db: Db, limit: number): Promise<AuthorizationRow[]> {
  return db
    .selectFrom("agent_payment_authorizations")
    .select(AUTHORIZATION_COLUMNS)
    .where("status", "=", AGENT_PAYMENT_TRANSITIONS.settled.from)
    .orderBy("valid_before", "asc")
    .limit(limit)
    .execute();
}

/**
 * An authorized authorization's end (compare-and-set on the table's `from`): `settled` by the
 * transaction that used it (null when it could not be found), or `expired` unused; undefined when
 * it had already ended.
 */
export async function endAuthorization(
  trx: Db,
  id: string,
  trigger: "settled" | "expired",
  txHash: string | null,
): Promise<AuthorizationRow | undefined> {
  const rule = AGENT_PAYMENT_TRANSITIONS[trigger];
  return trx
    .updateTable("agent_payment_authorizations")
    .set({ status: rule.to, payment_signature: null, ...(trigger === "settled" ? { tx_hash: txHash } : {}) })
    .where("id", "=", id)
    .where("status", "=", rule.from)
    .returning(AUTHORIZATION_COLUMNS)
    .executeTakeFirst();
}
