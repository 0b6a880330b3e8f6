import type { FastifyBaseLogger } from "fastify";
import type { Environment, NetworkConfig } from "../config.ts";
import { NetworkUnavailable } from "../domain/errors.ts";
import type { Db } from "../platform/db/database.ts";
import { EvmNetwork } from "./evm/evm-network.ts";
import type { Network } from "./network.ts";
import { NetworkHealth } from "./network-health.ts";
import { TransactionSender } from "./transaction-sender.ts";

// The chains this process talks to (D22): each configured network of each environment, with its
// node client and its nonce-ordered sender, found by environment and network id. Built once at
// start from the configuration; nothing here reaches a node.

/** One configured network: what it is, its node, and the one sender of its wallets' transactions. */
export interface Chain {
  config: NetworkConfig;
  network: Network;
  /** Shared by settlement, payouts and gas top-ups on this network. */
  sender: TransactionSender;
  /** Whether its node answers, for a request about to rely on it. */
  health: NetworkHealth;
}

export class Chains {
  readonly #chains: readonly Chain[];

  constructor(chains: readonly Chain[]) {
    this.#chains = chains;
  }

  /** A chain for every network of `networks` (each environment's default first). */
  static of(networks: readonly NetworkConfig[], db: Db, log: FastifyBaseLogger): Chains {
    return new Chains(
      networks.map((config) => {
        const network = new EvmNetwork(config);
        return {
          config,
          network,
          sender: new TransactionSender(db, network, log),
          health: new NetworkHealth(network),
        };
      }),
    );
  }

  /** The environment's network `id`; none when it is not one of the environment's chains. */
  of(environment: Environment, id: string): Chain | undefined {
    return this.#chains.find((chain) => chain.config.environment === environment && chain.config.id === id);
  }

  /** The environment's default network (its first); none without a chain. */
  defaultOf(environment: Environment): Chain | undefined {
    return this.in(environment)[0];
  }

  /** The environment's chains, its default first. */
  in(environment: Environment): Chain[] {
    return this.#chains.filter((chain) => chain.config.environment === environment);
  }

  all(): readonly Chain[] {
    return this.#chains;
  }

  /**
   * Throws NetworkUnavailable (503) when the environment's chain `id` does not answer; a network
   * that is not a chain here (the sandbox's ledger) always does.
   */
  async assertAnswers(environment: Environment, id: string): Promise<void> {
    const chain = this.of(environment, id);
    if (chain && !(await chain.health.answers())) throw new NetworkUnavailable(id);
  }
}
