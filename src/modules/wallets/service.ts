import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import type { ChainToken, Hex } from "../../chain/network.ts";
import type { SimulatedLedger } from "../../chain/simulated/ledger.ts";
import { SIMULATED_NETWORKS } from "../../chain/simulated/networks.ts";
import type { Environment } from "../../config.ts";
import type { AppContext } from "../../context.ts";
import { badRequest, InternalError, notFound } from "../../domain/errors.ts";
import {
  formatAmount,
  isWalletCurrency,
  isWalletType,
  TOKEN_DECIMALS,
  type WalletCurrency,
} from "../../domain/money.ts";
import { isPlainObject, isUuid } from "../../domain/validation.ts";
import type { Db } from "../../platform/db/database.ts";
import type { Tenant } from "../../platform/http/auth.ts";
import type { AgentsService } from "../agents/service.ts";
import { UnknownNetwork } from "../networks/directory.ts";
import { recordEvents } from "../webhooks/outbox.ts";
import type { WalletRow, WatchedWallet } from "./repo.ts";
import * as repo from "./repo.ts";

// Wallet records of agents and users (part 4.17, D8): each is a real key held by the service
// (encrypted at rest) with a real address; balances come from each of the environment's networks
// (the simulated ledger in the sandbox), a page of wallets read in one batched round trip per network.

export interface BalanceReader {
  balance(address: Hex, token: ChainToken): Promise<bigint>;
}

/**
 * The environment's wallets, for the chain watcher. A function of the handle it is given: the
 * watcher is also built on its own, without the app's services (tests, the bench).
 */
export function watchedWallets(db: Db, environment: Environment): Promise<WatchedWallet[]> {
  return repo.walletsOf(db, environment);
}

export class AgentWalletsService {
  readonly #ctx: AppContext;
  readonly #agents: AgentsService;
  readonly #ledger: SimulatedLedger;

  constructor(ctx: AppContext, agents: AgentsService, ledger: SimulatedLedger) {
    this.#ctx = ctx;
    this.#agents = agents;
    this.#ledger = ledger;
  }

  /**
   * The balance reader of each of the environment's networks, its default first (D22): its
   * chains, or the sandbox's ledger networks (`sandbox-a`, `sandbox-b`); none in live without a chain.
   */
  #readers(environment: Environment): Array<[network: string, reader: BalanceReader]> {
    const chains = this.#ctx.chains.in(environment);
    if (chains.length > 0) return chains.map((chain) => [chain.config.id, chain.network]);
    if (environment === "sandbox")
      return SIMULATED_NETWORKS.map(({ id }) => [
        id,
        { balance: (address, token) => this.#ledger.balance(id, address, token) },
      ]);
    throw badRequest("Live network is not configured: balances are unavailable");
  }

  /** The reader of `network` (else the default one), or the 400 that says why there is none. */
  #reader(environment: Environment, network: string | null): BalanceReader {
    const readers = this.#readers(environment);
    const found = network === null ? readers[0] : readers.find(([id]) => id === network);
    if (!found) throw new UnknownNetwork(network ?? "default");
    return found[1];
  }

  async create(principal: Tenant, body: unknown) {
    if (!isPlainObject(body)) throw badRequest("Request body must be a JSON object");
    const { ownerId, type, currencies } = body;
    if (typeof ownerId !== "string" || ownerId.length === 0 || ownerId.length > 200) {
      throw badRequest("ownerId is required (1 to 200 characters)");
    }
    if (!isWalletType(type)) throw badRequest("type must be agent or user");
    if (!Array.isArray(currencies) || currencies.length === 0 || !currencies.every(isWalletCurrency)) {
      throw badRequest("currencies must be a non-empty array of ETH, USDC, DAI");
    }
    if (new Set(currencies).size !== currencies.length) throw badRequest("currencies must not repeat");
    if (type === "agent" && !(await this.#agents.exists(principal, ownerId))) {
      throw badRequest("ownerId must be an agent of this workspace");
    }
    const privateKey = generatePrivateKey();
    const address = privateKeyToAccount(privateKey).address;
    return this.#ctx.db.transaction().execute(async (trx) => {
      const row = await repo.insertWallet(trx, principal, {
        ownerId,
        type,
        address,
        encryptedPrivateKey: this.#ctx.secrets.encrypt(privateKey),
        currencies,
        createdAt: this.#ctx.now(),
      });
      const view = toView(row);
      await recordEvents(trx, [{ ...scope(principal), type: "wallet.created", payload: { ...view } }]);
      return view;
    });
  }

  async get(principal: Tenant, id: string) {
    const row = await this.find(principal, id);
    const [withBalances] = await this.#withBalances(principal.environment, [row]);
    if (!withBalances) throw new InternalError("a wallet's balances were not read");
    return withBalances;
  }

  async list(
    principal: Tenant,
    query: {
      page: number;
      limit: number;
      ownerId?: string | undefined;
      type?: string | undefined;
      currency?: string | undefined;
    },
  ) {
    if (query.type !== undefined && !isWalletType(query.type)) throw badRequest("type must be agent or user");
    if (query.currency !== undefined && !isWalletCurrency(query.currency))
      throw badRequest("currency must be ETH, USDC or DAI");
    const { rows, total } = await repo.listWallets(this.#ctx.db, principal, {
      ownerId: query.ownerId,
      type: query.type,
      currency: query.currency,
      limit: query.limit,
      offset: (query.page - 1) * query.limit,
    });
    return {
      items: await this.#withBalances(principal.environment, rows),
      pagination: { total, page: query.page, limit: query.limit, totalPages: Math.ceil(total / query.limit) },
    };
  }

  /**
   * A page of the tenant's wallets of one type without their balances (the dashboard's agent
   * wallets page: no chain reads, so it shows in live without a network too).
   */
  async summaries(principal: Tenant, query: { page: number; limit: number; type: "agent" | "user" }) {
    const { rows, total } = await repo.listWallets(this.#ctx.db, principal, {
      type: query.type,
      limit: query.limit,
      offset: (query.page - 1) * query.limit,
    });
    return { items: rows.map(toView), total };
  }

  /** One currency's balance on the network `query` names (else the default one). */
  async balance(principal: Tenant, id: string, currency: string, query: unknown = {}) {
    const row = await this.find(principal, id);
    if (!isWalletCurrency(currency)) throw badRequest("currency must be ETH, USDC or DAI");
    if (!row.currencies.includes(currency)) throw badRequest(`This wallet does not hold ${currency}`);
    const network = this.#ctx.directory.resolveIn(principal.environment, query);
    const units = await this.#reader(principal.environment, network).balance(row.address as Hex, currency);
    return {
      walletId: row.id,
      currency,
      network,
      balance: formatAmount(units, TOKEN_DECIMALS[currency]),
      updatedAt: this.#ctx.now().toISOString(),
    };
  }

  async addCurrency(principal: Tenant, id: string, body: unknown) {
    const currency = isPlainObject(body) ? body.currency : undefined;
    if (!isWalletCurrency(currency)) throw badRequest("currency must be ETH, USDC or DAI");
    const row = await this.find(principal, id);
    if (row.currencies.includes(currency)) return this.get(principal, id); // unchanged, no event (D13)
    await this.#ctx.db.transaction().execute(async (trx) => {
      const updated = await repo.setCurrencies(trx, row.id, [...row.currencies, currency]);
      await recordEvents(trx, [
        { ...scope(principal), type: "wallet.currency.added", payload: { ...toView(updated), currency } },
      ]);
    });
    return this.get(principal, id);
  }

  /** A wallet of the key's workspace and environment (the sandbox faucet credits it too). */
  async find(principal: Tenant, id: unknown): Promise<WalletRow> {
    const row = isUuid(id) ? await repo.findWallet(this.#ctx.db, principal, id) : undefined;
    if (!row) throw notFound("Wallet not found");
    return row;
  }

  /**
   * All balances of a page in one go, on each network: `balances` the default network's, and
   * `networks: {<id>: balances}` (D22). The reads run concurrently, one batched connection per chain.
   */
  async #withBalances(environment: Environment, rows: WalletRow[]) {
    const pairs = rows.flatMap((row) =>
      row.currencies.map((currency) => ({ row, currency: currency as WalletCurrency })),
    );
    const readers = pairs.length === 0 ? [] : this.#readers(environment);
    const read = await Promise.all(
      readers.map(async ([network, reader]) => {
        const values = await Promise.all(pairs.map((p) => reader.balance(p.row.address as Hex, p.currency)));
        return { network, values };
      }),
    );
    const balancesOf = (row: WalletRow, values: bigint[]) => {
      const balances: Record<string, string> = {};
      pairs.forEach((p, i) => {
        if (p.row === row) balances[p.currency] = formatAmount(values[i] ?? 0n, TOKEN_DECIMALS[p.currency]);
      });
      return balances;
    };
    return rows.map((row) => {
      const networks = Object.fromEntries(
        read.map(({ network, values }) => [network, balancesOf(row, values)]),
      );
      return { ...toView(row), balances: balancesOf(row, read[0]?.values ?? []), networks };
    });
  }
}

function toView(row: WalletRow) {
  // The table's checks allow nothing else: a row that says otherwise is a fault, said loudly.
  if (!isWalletType(row.type)) throw new InternalError("a wallet's type is unknown");
  const currencies = row.currencies.filter(isWalletCurrency);
  if (currencies.length !== row.currencies.length) throw new InternalError("a wallet's currency is unknown");
  return {
    walletId: row.id,
    address: row.address,
    ownerId: row.owner_id,
    type: row.type,
    currencies,
    createdAt: row.created_at.toISOString(),
  };
}

function scope(principal: Tenant): { workspaceId: string; environment: Environment } {
  return { workspaceId: principal.workspaceId, environment: principal.environment };
}
