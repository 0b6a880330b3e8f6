import { randomBytes } from "node:crypto";
import type { AliasableExpression, Expression } from "kysely";
import { LRUCache } from "lru-cache";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import type { Environment } from "../../config.ts";
import type { AppContext } from "../../context.ts";
import { badRequest, notFound } from "../../domain/errors.ts";
import { ownWalletProblem } from "../../domain/own-wallets.ts";
import { isAddress, isUuid } from "../../domain/validation.ts";
import { coalescedLookup } from "../../platform/db/coalesced-lookup.ts";
import type { Db } from "../../platform/db/database.ts";
import { hashApiKey, hashPassword, needsRehash } from "../../platform/secrets/hashing.ts";
import { type IssuedKey, issueKey } from "../keys/service.ts";
import { type Branding, brandingOf } from "./branding-repo.ts";
import * as repo from "./repo.ts";

export type { Branding };

// Workspaces (D2). Creating one provisions its EOA: a fresh secp256k1 key generated here and
// stored only encrypted with the master key, plus one sandbox and one live API key.

const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;
/** How long the link confirming a new admin e-mail works. */
export const EMAIL_CHANGE_TTL_MS = 24 * 3_600_000;

export interface CreateWorkspaceInput {
  name: string;
  settlementAddress?: string | undefined;
  adminEmail?: string | undefined;
  adminPassword?: string | undefined;
}

export type DefaultWalletType = "workspace" | "smart_wallet";

/**
 * Every wallet the service receives payments on, for the chain watcher. A function of the
 * handle it is given: the watcher is also built on its own, without the app's services.
 */
export function receivingWallets(db: Db): Promise<Array<{ address: string; workspaceId: string }>> {
  return repo.receivingWallets(db);
}

export interface WorkspaceView {
  id: string;
  workspaceId: string;
  name: string;
  settlement_address: string | null;
  /** The default of the reader's environment (a key's own; the admin secret's: live). */
  defaultWalletType: DefaultWalletType;
  adminEmail: string | null;
  /** What payers see on the hosted page (D25); null: `name`. */
  displayName: string | null;
  brandColor: string | null;
  eoa: { address: string; createdAt: string };
  smartWallet: {
    address: string;
    walletId: string;
    createdAt: string;
    ownerAddress: string;
    type: "smart_wallet";
  } | null;
  createdAt: string;
}

/** What payments need to know about a workspace: settlement fallback and receiving wallets. */
export interface WorkspaceProfile {
  id: string;
  name: string;
  settlementAddress: string | null;
  /** Per environment (D21): what a payment or payout of that environment uses when it names none. */
  defaultWalletTypes: Record<Environment, DefaultWalletType>;
  eoaAddress: string | null;
  smartWalletAddress: string | null;
}

function validateInput(input: CreateWorkspaceInput): void {
  if (typeof input.name !== "string" || input.name.trim().length === 0 || input.name.length > 200) {
    throw badRequest("name is required (1 to 200 characters)");
  }
  if (input.settlementAddress !== undefined && !isAddress(input.settlementAddress)) {
    throw badRequest("settlementAddress must be 0x followed by 40 hex characters");
  }
  if (input.adminEmail !== undefined && (!EMAIL.test(input.adminEmail) || input.adminEmail.length > 254)) {
    throw badRequest("adminEmail must be an e-mail address");
  }
  if (
    input.adminPassword !== undefined &&
    (input.adminPassword.length < 12 || input.adminPassword.length > 200)
  ) {
    throw badRequest("adminPassword must be 12 to 200 characters");
  }
}

export class WorkspacesService {
  readonly #ctx: AppContext;
  /**
   * Encrypted EOA keys by workspace. A workspace's EOA row is written once and never changed, so
   * the ciphertext can be kept; it is decrypted for each use, and the plain key is never kept.
   */
  readonly #encryptedKeys = new LRUCache<string, { address: string; encrypted: string }>({ max: 10_000 });
  /** Profiles are read on most requests (payments, payouts): requests arriving together share a query. */
  readonly #profiles;
  /** Receiving addresses by workspace (see receivingAddresses). */
  readonly #receiving = new LRUCache<string, ReceivingAddresses>({ max: 10_000 });

  constructor(ctx: AppContext) {
    this.#ctx = ctx;
    this.#profiles = coalescedLookup((ids: readonly string[]) => repo.findProfiles(ctx.db, ids));
  }

  async create(
    input: CreateWorkspaceInput,
  ): Promise<{ workspace: WorkspaceView; apiKeys: { test: IssuedKey; live: IssuedKey } }> {
    validateInput(input);
    const passwordHash = input.adminPassword
      ? await hashPassword(input.adminPassword, this.#ctx.passwordCost)
      : null;
    const privateKey = generatePrivateKey();
    const address = privateKeyToAccount(privateKey).address;
    const encrypted = this.#ctx.secrets.encrypt(privateKey);

    return this.#ctx.db.transaction().execute(async (trx) => {
      const row = await repo.insertWorkspace(trx, {
        name: input.name.trim(),
        settlementAddress: input.settlementAddress ?? null,
        adminEmail: input.adminEmail?.toLowerCase() ?? null,
        adminPasswordHash: passwordHash,
      });
      const eoa = await repo.insertWallet(trx, {
        workspaceId: row.id,
        kind: "eoa",
        address,
        encryptedPrivateKey: encrypted,
      });
      const test = await issueKey(trx, row.id, "sandbox", "Default sandbox key");
      const live = await issueKey(trx, row.id, "live", "Default live key");
      return { workspace: toView(row, [eoa], "live"), apiKeys: { test, live } };
    });
  }

  /** The workspace as `environment` sees it (its default wallet type). */
  async get(id: string, environment: Environment): Promise<WorkspaceView> {
    const row = isUuid(id) ? await repo.findWorkspace(this.#ctx.db, id) : undefined;
    if (!row) throw notFound("Workspace not found");
    return toView(row, await repo.findWallets(this.#ctx.db, id), environment);
  }

  /** The decrypted key of a service-held workspace wallet, for signing settlements and payouts. */
  async signingKey(workspaceId: string, address: string): Promise<`0x${string}`> {
    let held = this.#encryptedKeys.get(workspaceId);
    if (!held) {
      const row = await repo.findEncryptedEoaKey(this.#ctx.db, workspaceId);
      if (row?.encrypted_private_key) {
        held = { address: row.address, encrypted: row.encrypted_private_key };
        this.#encryptedKeys.set(workspaceId, held);
      }
    }
    if (!held || held.address.toLowerCase() !== address.toLowerCase()) {
      throw new Error(`no signing key held for ${address}`);
    }
    return this.#ctx.secrets.decrypt(held.encrypted) as `0x${string}`;
  }

  /** EOAs of every workspace, for the gas top-up job. */
  allEoaAddresses(): Promise<string[]> {
    return repo.eoaAddresses(this.#ctx.db);
  }

  /**
   * An environment's default wallet type and the wallets, for the smart wallet's endpoints;
   * undefined: no workspace.
   */
  async walletSetup(
    id: string,
    environment: Environment,
  ): Promise<{ defaultWalletType: DefaultWalletType; wallets: repo.WalletRecord[] } | undefined> {
    const column = await repo.findDefaultWalletType(this.#ctx.db, id, environment);
    if (column === undefined) return undefined;
    return {
      defaultWalletType: defaultWalletType(column),
      wallets: await repo.findWallets(this.#ctx.db, id),
    };
  }

  /** Records the workspace's smart wallet; false when it already has one (creation is idempotent). */
  addSmartWallet(workspaceId: string, address: string): Promise<boolean> {
    return repo.insertSmartWallet(this.#ctx.db, workspaceId, address);
  }

  /** Sets one environment's default (the other's is left alone); false when there is no such workspace. */
  setDefaultWalletType(
    workspaceId: string,
    environment: Environment,
    value: DefaultWalletType,
  ): Promise<boolean> {
    return repo.setDefaultWalletType(this.#ctx.db, workspaceId, environment, value);
  }

  /**
   * The workspaces a dashboard login names: those whose admin e-mail is `email` and that have a
   * password (an e-mail is not unique across workspaces; docs/dashboard.md says how login chooses).
   */
  loginCandidates(email: string): Promise<Array<{ id: string; name: string; passwordHash: string }>> {
    return repo.loginCandidates(this.#ctx.db, email.trim().toLowerCase());
  }

  /** The stored hash of the admin password, null when none was set. */
  passwordHash(workspaceId: string): Promise<string | null> {
    return isUuid(workspaceId) ? repo.passwordHashOf(this.#ctx.db, workspaceId) : Promise.resolve(null);
  }

  /** Sets the admin password (the CLI's set-password, the dashboard's settings). */
  async setPassword(workspaceId: string, password: string): Promise<void> {
    if (typeof password !== "string" || password.length < 12 || password.length > 200)
      throw badRequest("password must be 12 to 200 characters");
    const hash = await hashPassword(password, this.#ctx.passwordCost);
    if (!isUuid(workspaceId) || !(await repo.setPasswordHash(this.#ctx.db, workspaceId, hash)))
      throw notFound("Workspace not found");
  }

  /** What the dashboard's settings page shows. */
  async settings(workspaceId: string) {
    const found = isUuid(workspaceId) ? await repo.settingsOf(this.#ctx.db, workspaceId) : undefined;
    if (!found) throw notFound("Workspace not found");
    return found;
  }

  /**
   * The dashboard's settings form: the settlement address (empty clears it: payments then need a
   * merchantWallet of their own) is set at once; a new admin e-mail only waits for its
   * confirmation (D21): the answer has the token of the link to mail to it, which
   * `confirmAdminEmail` takes. Both are checked before anything is written.
   */
  async updateSettings(
    workspaceId: string,
    input: { settlementAddress: string; adminEmail: string },
  ): Promise<{ emailChange: { email: string; token: string; expiresAt: Date } | null }> {
    const settlementAddress = input.settlementAddress.trim();
    const adminEmail = input.adminEmail.trim().toLowerCase();
    if (settlementAddress !== "" && !isAddress(settlementAddress))
      throw badRequest("settlementAddress must be 0x followed by 40 hex characters");
    if (!EMAIL.test(adminEmail) || adminEmail.length > 254)
      throw badRequest("adminEmail must be an e-mail address");
    if (settlementAddress !== "") {
      const { eoaAddress, smartWalletAddress } = await this.profile(workspaceId);
      const problem = ownWalletProblem("settlementAddress", settlementAddress, [
        eoaAddress,
        smartWalletAddress,
      ]);
      if (problem) throw badRequest(problem);
    }
    const current = isUuid(workspaceId) ? await repo.settingsOf(this.#ctx.db, workspaceId) : undefined;
    if (!current) throw notFound("Workspace not found");
    const now = this.#ctx.now();
    const token = randomBytes(32).toString("base64url");
    const emailChange =
      adminEmail === current.adminEmail
        ? null
        : { email: adminEmail, token, expiresAt: new Date(now.getTime() + EMAIL_CHANGE_TTL_MS) };
    const updated = await this.#ctx.db.transaction().execute(async (trx) => {
      if (emailChange)
        await repo.putEmailChange(trx, {
          tokenHash: hashApiKey(token),
          workspaceId,
          newEmail: adminEmail,
          createdAt: now,
          expiresAt: emailChange.expiresAt,
        });
      return repo.updateSettings(trx, workspaceId, {
        settlementAddress: settlementAddress === "" ? null : settlementAddress,
      });
    });
    if (!updated) throw notFound("Workspace not found");
    return { emailChange };
  }

  /** The new admin e-mail waiting for its link to be opened, if any. */
  pendingAdminEmail(workspaceId: string): Promise<{ email: string; expiresAt: Date } | null> {
    return isUuid(workspaceId)
      ? repo.pendingEmail(this.#ctx.db, workspaceId, this.#ctx.now())
      : Promise.resolve(null);
  }

  /** Withdraws the workspace's pending admin e-mail change (its link could not be mailed). */
  async cancelAdminEmailChange(workspaceId: string): Promise<void> {
    if (isUuid(workspaceId)) await repo.deleteEmailChange(this.#ctx.db, workspaceId);
  }

  /**
   * The link mailed to a new admin e-mail was opened: the e-mail becomes the workspace's. A token
   * works once (its row is deleted, also when it had expired) and only before it expires.
   */
  async confirmAdminEmail(token: string): Promise<{ workspaceId: string; email: string }> {
    const now = this.#ctx.now();
    const confirmed = await this.#ctx.db.transaction().execute(async (trx) => {
      const change = await repo.takeEmailChange(trx, hashApiKey(token));
      if (!change || change.expiresAt.getTime() <= now.getTime()) return null;
      await repo.setAdminEmail(trx, change.workspaceId, change.newEmail);
      return { workspaceId: change.workspaceId, email: change.newEmail };
    });
    if (!confirmed)
      throw notFound(
        "This confirmation link is not valid: it was already used, has expired or was replaced by a newer one",
      );
    return confirmed;
  }

  /** After a successful login: a hash made with less than today's cost is replaced (D21). */
  async upgradePasswordHash(workspaceId: string, stored: string, password: string): Promise<void> {
    const cost = this.#ctx.passwordCost;
    if (!needsRehash(stored, cost)) return;
    await repo.replacePasswordHash(this.#ctx.db, workspaceId, stored, await hashPassword(password, cost));
  }

  /**
   * Where the workspace is paid, as far as `payee` is concerned (x402 checks every payee): no query
   * when `payee` is a wallet seen before. Wallet rows are written once and never changed, but a
   * smart wallet may be made later, so any other payee is looked up afresh.
   */
  async receivingAddresses(id: string, payee: string): Promise<ReceivingAddresses> {
    const key = id.toLowerCase();
    const known = this.#receiving.get(key);
    const matches = (address: string | null) =>
      address !== null && address.toLowerCase() === payee.toLowerCase();
    if (known && (matches(known.eoaAddress) || matches(known.smartWalletAddress))) return known;
    const { eoaAddress, smartWalletAddress } = await this.profile(id);
    const addresses = { eoaAddress, smartWalletAddress };
    if (eoaAddress !== null) this.#receiving.set(key, addresses);
    return addresses;
  }

  /**
   * The checkout branding (D25) of the workspace `workspaceId` names, as an expression another
   * module's statement carries (null: no such workspace). Never kept: a change shows at once everywhere.
   */
  brandingOf(workspaceId: Expression<string>): AliasableExpression<Branding | null> {
    return brandingOf(this.#ctx.db, workspaceId);
  }

  /** One query: payments read this on every create. */
  async profile(id: string): Promise<WorkspaceProfile> {
    // Keyed by the database's spelling of a UUID (lower case).
    const row = isUuid(id) ? await this.#profiles(id.toLowerCase()) : undefined;
    if (!row) throw notFound("Workspace not found");
    return {
      id: row.id,
      name: row.name,
      settlementAddress: row.settlement_address,
      defaultWalletTypes: {
        sandbox: defaultWalletType(row.sandbox_default_wallet_type),
        live: defaultWalletType(row.live_default_wallet_type),
      },
      eoaAddress: row.eoa_address,
      smartWalletAddress: row.smart_wallet_address,
    };
  }
}

/** The addresses a workspace is paid at: its EOA and, once made, its smart wallet. */
export interface ReceivingAddresses {
  eoaAddress: string | null;
  smartWalletAddress: string | null;
}

/** Anything but a smart wallet is the EOA ("workspace"), as the column's default. */
function defaultWalletType(column: string): DefaultWalletType {
  return column === "smart_wallet" ? "smart_wallet" : "workspace";
}

function toView(
  row: Awaited<ReturnType<typeof repo.findWorkspace>> & object,
  wallets: repo.WalletRecord[],
  environment: Environment,
): WorkspaceView {
  const eoa = wallets.find((w) => w.kind === "eoa");
  if (!eoa) throw new Error(`workspace ${row.id} has no EOA`);
  const smart = wallets.find((w) => w.kind === "smart_wallet");
  return {
    id: row.id,
    workspaceId: row.id,
    name: row.name,
    settlement_address: row.settlement_address,
    defaultWalletType: defaultWalletType(
      environment === "live" ? row.live_default_wallet_type : row.sandbox_default_wallet_type,
    ),
    adminEmail: row.admin_email,
    displayName: row.display_name,
    brandColor: row.brand_color,
    eoa: { address: eoa.address, createdAt: eoa.createdAt.toISOString() },
    smartWallet: smart
      ? {
          address: smart.address,
          walletId: smart.id,
          createdAt: smart.createdAt.toISOString(),
          ownerAddress: eoa.address,
          type: "smart_wallet",
        }
      : null,
    createdAt: row.created_at.toISOString(),
  };
}
