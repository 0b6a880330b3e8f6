import type { Hex } from "../../chain/network.ts";
import { SIMULATED_NETWORKS, type SimulatedNetwork } from "../../chain/simulated/networks.ts";
import { type Config, ENVIRONMENTS, type Environment, type NetworkConfig } from "../../config.ts";
import { InvalidRequest } from "../../domain/errors.ts";
import { CHAIN_TOKENS, type ChainToken, NATIVE_TOKEN, TOKEN_DECIMALS } from "../../domain/money.ts";
import { isPlainObject } from "../../domain/validation.ts";
import { NETWORK_ID } from "../../network-config.ts";

// Which networks each environment has (D22), as the API lists them and as a request's `network`
// is checked against: the chains the configuration names, or, in a sandbox without one, its
// simulated networks (sandbox-a, the default, and sandbox-b). Built once from the configuration; nothing here reaches a node.

export interface NetworkToken {
  symbol: ChainToken;
  /** The token's contract; null for the chain's native coin. */
  address: Hex | null;
  decimals: number;
}

/** A network as `GET /api/v1/networks` shows it. */
export interface NetworkListing {
  id: string;
  caip2: string;
  name: string;
  chainId: number;
  /** The sandbox's simulated ledger rather than a chain. */
  simulated: boolean;
  /** The network a request that names none goes to. */
  default: boolean;
  tokens: NetworkToken[];
  confirmations: number;
  smartWallets: boolean;
  swaps: boolean;
}

export interface EnvironmentNetworks {
  environment: Environment;
  /** The default network's id; null when the environment has no network (live without a chain). */
  default: string | null;
  networks: NetworkListing[];
}

/** A `network` a request names that its key's environment does not have (D22): 400. */
export class UnknownNetwork extends InvalidRequest {
  constructor(network: string) {
    super("Unknown network", { network });
  }
}

/**
 * A list's `network` filter (query string): unset when absent or empty, else an id as
 * `GET /api/v1/networks` lists them (400 otherwise). Not checked against the environment: a
 * network no longer configured still names its records.
 */
export function networkFilter(value: unknown): string | undefined {
  if (value === undefined || value === "") return undefined;
  if (typeof value !== "string" || !NETWORK_ID.test(value))
    throw new InvalidRequest("network must be a network id, as GET /api/v1/networks lists them");
  return value;
}

const fieldOf = (body: unknown, name: string): unknown => (isPlainObject(body) ? body[name] : undefined);

/** Whether a request body names a network at all (where none applies, naming one is refused). */
export const namesNetwork = (body: unknown): boolean =>
  fieldOf(body, "network") !== undefined || fieldOf(body, "networks") !== undefined;

const native: NetworkToken = { symbol: NATIVE_TOKEN, address: null, decimals: TOKEN_DECIMALS[NATIVE_TOKEN] };

function tokensOf(addresses: Partial<Record<ChainToken, string | undefined>>): NetworkToken[] {
  const erc20s = CHAIN_TOKENS.flatMap((symbol) => {
    const address = addresses[symbol];
    return address ? [{ symbol, address: address as Hex, decimals: TOKEN_DECIMALS[symbol] }] : [];
  });
  return [native, ...erc20s];
}

function chainListing(config: NetworkConfig): Omit<NetworkListing, "default"> {
  return {
    id: config.id,
    caip2: config.caip2,
    name: config.name,
    chainId: config.chainId,
    simulated: false,
    tokens: tokensOf(config.tokens),
    confirmations: config.confirmations,
    smartWallets: config.accountAbstraction !== undefined,
    swaps: config.swap !== undefined,
  };
}

/** The sandbox's ledger: payments confirm when they are made; smart wallets and swaps are simulated. */
function simulatedListing(network: SimulatedNetwork): Omit<NetworkListing, "default"> {
  return {
    id: network.id,
    caip2: `eip155:${network.chainId}`,
    name: network.name,
    chainId: network.chainId,
    simulated: true,
    tokens: tokensOf(network.tokens),
    confirmations: 0,
    smartWallets: true,
    swaps: true,
  };
}

export class NetworkDirectory {
  readonly #environments: Record<Environment, EnvironmentNetworks>;

  constructor(config: Pick<Config, "networks">) {
    const listed = (environment: Environment): Omit<NetworkListing, "default">[] => {
      const chains = config.networks[environment];
      if (chains.length > 0) return chains.map(chainListing);
      return environment === "sandbox" ? SIMULATED_NETWORKS.map(simulatedListing) : [];
    };
    const environments = {} as Record<Environment, EnvironmentNetworks>;
    for (const environment of ENVIRONMENTS) {
      const networks = listed(environment).map((network, i) => ({ ...network, default: i === 0 }));
      environments[environment] = { environment, default: networks[0]?.id ?? null, networks };
    }
    this.#environments = environments;
  }

  /** The environment's networks, the default first. */
  list(environment: Environment): EnvironmentNetworks {
    return this.#environments[environment];
  }

  /**
   * The network a request goes to: the one it names, or the environment's default when it names
   * none (null: the environment has no network, which the caller answers as it always has). A
   * network the environment does not have is refused, never replaced by the default.
   */
  resolve(environment: Environment, requested: string | undefined): string | null {
    if (requested === undefined) return this.#environments[environment].default;
    return this.#known(environment, requested);
  }

  #known(environment: Environment, id: string): string {
    if (!this.#environments[environment].networks.some((network) => network.id === id))
      throw new UnknownNetwork(id);
    return id;
  }

  /** `resolveField` for the `network` of a request body or query, whatever was sent. */
  resolveIn(environment: Environment, body: unknown): string | null {
    return this.resolveField(environment, fieldOf(body, "network"));
  }

  /**
   * The networks a payment may be paid on (D22): `networks` when the body names them (a list of
   * distinct ids of the environment, instead of `network`), else the one `network` resolves to;
   * none for a payment off chain (`onChain` false: a card payment), which may name neither.
   */
  resolvePaymentNetworks(environment: Environment, body: unknown, onChain: boolean): string[] {
    const listed = fieldOf(body, "networks");
    if (!onChain) {
      if (namesNetwork(body)) throw new InvalidRequest("network and networks apply to crypto payments only");
      return [];
    }
    if (listed === undefined || listed === null) {
      const one = this.resolveIn(environment, body);
      return one === null ? [] : [one];
    }
    if (fieldOf(body, "network") !== undefined)
      throw new InvalidRequest("Give network or networks, not both");
    if (
      !Array.isArray(listed) ||
      listed.length === 0 ||
      listed.some((id) => typeof id !== "string" || id === "")
    ) {
      throw new InvalidRequest(
        "networks must be a non-empty list of network ids, as GET /api/v1/networks lists them",
      );
    }
    if (new Set(listed).size !== listed.length)
      throw new InvalidRequest("networks must not name a network twice");
    return listed.map((id: string) => this.#known(environment, id));
  }

  /** `resolve` for a request body's `network` field, which must be an id when it is given. */
  resolveField(environment: Environment, value: unknown): string | null {
    if (value === undefined || value === null) return this.resolve(environment, undefined);
    if (typeof value !== "string" || value === "") {
      throw new InvalidRequest("network must be a network id, as GET /api/v1/networks lists them");
    }
    return this.resolve(environment, value);
  }
}
