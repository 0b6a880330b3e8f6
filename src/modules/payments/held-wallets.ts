import { type RawBuilder, sql } from "kysely";
import type { OnNetwork } from "../../chain/network.ts";
import type { Environment } from "../../config.ts";

// The money held on wallets (unsettled payments, open inbox transfers) is read for many wallets at
// once: the payouts, refunds and settlements checked in one round of I/O each ask for their own
// wallet (coalescedLookup), and ONE statement answers them all, each row naming the wallet it is of.

/** A wallet on a network, as the held-money reads take it. */
export interface WalletOn {
  on: OnNetwork;
  address: string;
}

/** A row read for one of the wallets asked for: `wallet` is its position among them. */
export interface OfWallet<T> {
  wallet: number;
  item: T;
}

/**
 * The wallets as a table `w(environment, network, address, i)` to join on: the address lower-case
 * (compare it with `lower(...)` of a column), `i` the wallet's position counted from 1.
 */
export function walletsTable(wallets: readonly WalletOn[]): RawBuilder<unknown> {
  return sql`unnest(
    ${wallets.map((w) => w.on.environment)}::text[],
    ${wallets.map((w) => w.on.id)}::text[],
    ${wallets.map((w) => w.address.toLowerCase())}::text[]
  ) WITH ORDINALITY AS w(environment, network, address, i)`;
}

/** The position (from 0) of a row's wallet, from `w.i` as the driver returns it (a bigint's text). */
export function walletIndex(i: string | number): number {
  return Number(i) - 1;
}

/**
 * `read` once for the distinct wallet keys ("<environment> <network> <address>") of a round: each
 * key's rows, `[]` for one with none.
 */
export async function byWallet<T>(
  keys: readonly string[],
  read: (wallets: WalletOn[]) => Promise<OfWallet<T>[]>,
): Promise<Map<string, T[]>> {
  const distinct = [...new Set(keys)];
  const wallets = distinct.map((key) => {
    const [environment, id, address] = key.split(" ") as [Environment, string, string];
    return { on: { environment, id }, address };
  });
  const found = new Map<string, T[]>(distinct.map((key) => [key, []]));
  if (wallets.length === 0) return found;
  for (const { wallet, item } of await read(wallets)) {
    const key = distinct[wallet];
    if (key !== undefined) found.get(key)?.push(item);
  }
  return found;
}
