import { sql } from "kysely";
import type { OnNetwork } from "../../../chain/network.ts";
import {
  CLAIM_TRANSITIONS,
  type ClaimTrigger,
  TRANSFER_CLAIMS,
  type TransferClaim,
} from "../../../domain/transfer-claim.ts";
import type { Db } from "../../../platform/db/database.ts";

// SQL of the transfers' claims (observed_transfers, migrations 011, 012, 026) beside the chain
// watcher's own (chain-repo.ts): what each incoming transfer counts as, once
// (domain/transfer-claim.ts). A claim is found by the transfer's identity
// (transaction, token, recipient, n-th within: what a reorg does not change) or, from a payment or
// an inbox item that recorded it, by where it was first seen (transaction and log index: unique
// within a transaction), on its network (D22). Claims move only by the transition table's
// compare-and-sets.

/** A transfer's identity (observed_transfers' key). */
export interface TransferKey {
  txHash: string;
  token: string;
  /** Any case; compared lower-case. */
  to: string;
  ordinal: number;
}

/** Where a payment's detection or an inbox item first saw its transfer. */
export interface TransferPlace {
  txHash: string;
  logIndex: number;
}

const keyColumns = (keys: readonly TransferKey[]) => sql`unnest(
  ${keys.map((k) => k.txHash.toLowerCase())}::text[],
  ${keys.map((k) => k.token)}::text[],
  ${keys.map((k) => k.to.toLowerCase())}::text[],
  ${keys.map((k) => k.ordinal)}::int[]
) AS k(tx_hash, token_symbol, to_address, ordinal)`;

const sameKey = sql`o.tx_hash = k.tx_hash AND o.token_symbol = k.token_symbol
  AND o.to_address = k.to_address AND o.ordinal = k.ordinal`;

const placeColumns = (places: readonly TransferPlace[]) => sql`unnest(
  ${places.map((p) => p.txHash)}::text[],
  ${places.map((p) => p.logIndex)}::int[]
) AS k(tx_hash, log_index)`;

const samePlace = sql`o.tx_hash = k.tx_hash AND o.log_index = k.log_index`;

/**
 * Moves the claims of the transfers first seen at `places` by `trigger`, where they still are where
 * its rule starts; how many moved. The caller holds what decides the move (the inbox item's row).
 */
export async function moveClaimsAt(
  trx: Db,
  on: OnNetwork,
  places: readonly TransferPlace[],
  trigger: ClaimTrigger,
): Promise<number> {
  if (places.length === 0) return 0;
  const rule = CLAIM_TRANSITIONS[trigger];
  const result = await sql`
    UPDATE observed_transfers o SET claim = ${sql.lit(rule.to)}
    FROM ${placeColumns(places)}
    WHERE o.environment = ${on.environment} AND o.network = ${on.id} AND ${samePlace} AND o.claim = ${sql.lit(rule.from)}
  `.execute(trx);
  return Number(result.numAffectedRows ?? 0n);
}

/**
 * Gives back the claims of transfers that left the chain before they counted for good (a
 * detection a reorg reverted), so that one mined again is accounted for again.
 */
export async function releaseClaimsAt(
  trx: Db,
  on: OnNetwork,
  places: readonly TransferPlace[],
): Promise<void> {
  if (places.length === 0) return;
  await sql`
    DELETE FROM observed_transfers o USING ${placeColumns(places)}
    WHERE o.environment = ${on.environment} AND o.network = ${on.id} AND ${samePlace}
  `.execute(trx);
}

/** The claims of `keys` that exist, locked, with where each was first seen; keyed by claimKey. */
export async function lockClaims(
  trx: Db,
  on: OnNetwork,
  keys: readonly TransferKey[],
): Promise<Map<string, { claim: TransferClaim; place: TransferPlace }>> {
  if (keys.length === 0) return new Map();
  const result = await sql<{
    tx_hash: string;
    token_symbol: string;
    to_address: string;
    ordinal: number;
    log_index: number;
    claim: string;
  }>`
    SELECT o.tx_hash, o.token_symbol, o.to_address, o.ordinal, o.log_index, o.claim
    FROM observed_transfers o JOIN ${keyColumns(keys)} ON ${sameKey}
    WHERE o.environment = ${on.environment} AND o.network = ${on.id}
    ORDER BY o.tx_hash, o.token_symbol, o.to_address, o.ordinal
    FOR UPDATE OF o
  `.execute(trx);
  return new Map(
    result.rows.map((r) => [
      claimKey({ txHash: r.tx_hash, token: r.token_symbol, to: r.to_address, ordinal: r.ordinal }),
      { claim: asClaim(r.claim), place: { txHash: r.tx_hash, logIndex: r.log_index } },
    ]),
  );
}

/**
 * Claims `keys` for `claim` where no claim exists; how many it claimed. A claim another
 * transaction is inserting meanwhile is waited for and then left alone (the count tells).
 */
export async function insertClaims(
  trx: Db,
  on: OnNetwork,
  transfers: ReadonlyArray<TransferKey & TransferPlace & { blockNumber: bigint }>,
  claim: TransferClaim,
): Promise<number> {
  if (transfers.length === 0) return 0;
  const result = await sql`
    INSERT INTO observed_transfers (environment, network, tx_hash, token_symbol, to_address, ordinal,
                                    log_index, block_number, claim)
    SELECT ${on.environment}, ${on.id}, tx_hash, token_symbol, to_address, ordinal, log_index, block_number, ${claim}
    FROM unnest(
      ${transfers.map((t) => t.txHash.toLowerCase())}::text[],
      ${transfers.map((t) => t.token)}::text[],
      ${transfers.map((t) => t.to.toLowerCase())}::text[],
      ${transfers.map((t) => t.ordinal)}::int[],
      ${transfers.map((t) => t.logIndex)}::int[],
      ${transfers.map((t) => t.blockNumber.toString())}::bigint[]
    ) AS t(tx_hash, token_symbol, to_address, ordinal, log_index, block_number)
    ON CONFLICT DO NOTHING
  `.execute(trx);
  return Number(result.numAffectedRows ?? 0n);
}

export function claimKey(key: TransferKey): string {
  return `${key.txHash.toLowerCase()}|${key.token}|${key.to.toLowerCase()}|${key.ordinal}`;
}

function asClaim(value: string): TransferClaim {
  const claim = TRANSFER_CLAIMS.find((c) => c === value);
  if (!claim) throw new Error(`observed_transfers holds an unknown claim "${value}"`);
  return claim;
}
