import { UniswapV3 } from "../../chain/evm/uniswap.ts";
import type { SimulatedLedger } from "../../chain/simulated/ledger.ts";
import { SIMULATED_NETWORKS } from "../../chain/simulated/networks.ts";
import { type Config, ENVIRONMENTS, type Environment } from "../../config.ts";
import { serviceUnavailable } from "../../domain/errors.ts";
import { DEFAULT_NETWORK_ID, networkPrefix } from "../../network-config.ts";
import type { Db } from "../../platform/db/database.ts";
import { SandboxVenue } from "./sandbox-venue.ts";
import { UniswapVenue } from "./uniswap-venue.ts";
import type { SwapVenue } from "./venue.ts";

/** Where each network's swaps trade, by environment and network id (`venueKey`). */
export type SwapVenues = ReadonlyMap<string, SwapVenue>;

export const venueKey = (environment: Environment, network: string): string => `${environment}.${network}`;

/**
 * Each network's swap venue, as its rails are chosen (rails/index.ts): a network trades on its
 * Uniswap v3 contracts when they are configured (none: 503); the sandbox without a network trades
 * on the simulated ledger's pools of each simulated network.
 */
export function buildSwapVenues(config: Config, db: Db, ledger: SimulatedLedger): SwapVenues {
  const venues = new Map<string, SwapVenue>();
  if (config.networks.sandbox.length === 0) {
    for (const { id } of SIMULATED_NETWORKS)
      venues.set(venueKey("sandbox", id), new SandboxVenue(db, ledger, id));
  }
  for (const environment of ENVIRONMENTS) {
    for (const network of config.networks[environment]) {
      if (network.swap)
        venues.set(
          venueKey(environment, network.id),
          new UniswapVenue(network.id, new UniswapV3(network, network.swap)),
        );
    }
  }
  return venues;
}

/** The venue of `network` in `environment`, or the 503 that names the variables it lacks. */
export function venueOf(venues: SwapVenues, environment: Environment, network: string): SwapVenue {
  const venue = venues.get(venueKey(environment, network));
  if (venue) return venue;
  const p = networkPrefix(environment, network);
  const where = network === DEFAULT_NETWORK_ID ? environment : `${environment} network ${network}`;
  throw serviceUnavailable(
    `Swaps are not configured for ${where}: set ${p}_SWAP_ROUTER_ADDRESS, ${p}_SWAP_QUOTER_ADDRESS, ${p}_SWAP_FACTORY_ADDRESS and ${p}_WETH_ADDRESS`,
  );
}
