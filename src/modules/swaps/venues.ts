import { UniswapV3 } from "../../chain/evm/uniswap.ts";
import type { SimulatedLedger } from "../../chain/simulated/ledger.ts";
import { type Config, ENVIRONMENTS, type Environment } from "../../config.ts";
import type { Db } from "../../platform/db/database.ts";
import { SandboxVenue } from "./sandbox-venue.ts";
import { UniswapVenue } from "./uniswap-venue.ts";
import type { SwapVenue } from "./venue.ts";

/**
 * Each environment's swap venue, as its rails are chosen (rails/index.ts): a network trades on its
 * Uniswap v3 contracts when they are configured (none: 503); the sandbox without a network trades
 * on the simulated ledger's pools.
 */
export function buildSwapVenues(
  config: Config,
  db: Db,
  ledger: SimulatedLedger,
): Partial<Record<Environment, SwapVenue>> {
  const venues: Partial<Record<Environment, SwapVenue>> = {};
  for (const environment of ENVIRONMENTS) {
    const network = config.networks[environment];
    if (!network) {
      if (environment === "sandbox") venues.sandbox = new SandboxVenue(db, ledger);
      continue;
    }
    if (network.swap) {
      venues[environment] = new UniswapVenue(network.id, new UniswapV3(network, network.swap));
    }
  }
  return venues;
}
