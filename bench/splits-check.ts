import type { Address } from "viem";
import { parseUnits } from "viem";
import type { DevnetClients } from "../test/support/devnet-clients.ts";
import { type PaymentJson, same, type WalletKind } from "./devnet-service.ts";

// bench/splits.ts's arithmetic and its correctness check at the end: the parts of a payment worked
// out by hand from D15 (bigint, not from src/), and what every address and settlement record must
// then hold.

export const TOKEN_DECIMALS = 6;
/** Odd units, so that the fee and every split round. */
export const AMOUNT = "12.345679";
export const SPLITS = [
  { label: "seller", percentBps: 2500 },
  { label: "affiliate", percentBps: 1000 },
  { label: "tax", percentBps: 333 },
] as const;
/** The parts of one AMOUNT payment, by hand (see parts()). */
export const BY_HAND = {
  fee: 185_185n,
  net: 12_160_494n,
  splits: [3_040_123n, 1_216_049n, 404_944n],
  merchant: 7_499_378n,
};
const FEE_BPS = 150n;
const BPS = 10_000n;
export const units = (amount: string) => parseUnits(amount, TOKEN_DECIMALS);

/**
 * D15: fee = gross × 150 / 10000 rounded half up; net = gross − fee; each split =
 * floor(net × bps / 10000); the merchant gets the rest of the net.
 */
export function parts(gross: bigint, bps: readonly number[]) {
  const fee = (gross * FEE_BPS + BPS / 2n) / BPS;
  const net = gross - fee;
  const splits = bps.map((b) => (net * BigInt(b)) / BPS);
  return { fee, net, splits, merchant: splits.reduce((rest, s) => rest - s, net) };
}

export interface SettlementJson {
  paymentIds: string[];
  merchantAmount: string;
  merchantWallet: string | null;
  txRef: string | null;
  splits: Array<{ label: string; amount: string; destination: string; status: string; txRef: string | null }>;
  createdAt: string;
}

/** One scenario of the bench: its workspace, addresses and what it settled. */
export interface Scenario {
  name: string;
  kind: WalletKind;
  withSplits: boolean;
  key: string;
  receiving: Address;
  merchant: Address;
  destinations: Address[];
  /** Settled payments, the warm-up first. */
  settled: Array<{ payment: PaymentJson; settlement: SettlementJson; paidBy: string }>;
  /** Confirmation → forwarded (ms): by the service's timestamps, and as the bench's polls saw it. */
  serviceMs: number[];
  seenMs: number[];
  /** Measured payments no poll saw `confirmed` (no figure for them). */
  missed: number;
}

/** What does not hold of `s` at the end (bench/splits.ts's header says what must). */
export async function check(s: Scenario, clients: DevnetClients): Promise<string[]> {
  const problems: string[] = [];
  const expect = parts(units(AMOUNT), s.withSplits ? SPLITS.map((x) => x.percentBps) : []);
  const n = BigInt(s.settled.length);
  const balance = async (who: string, address: Address, wanted: bigint) => {
    const got = await clients.usdcBalance(address);
    if (got !== wanted) problems.push(`${s.name}: ${who} ${address} holds ${got}, expected ${wanted}`);
  };
  await balance("merchant", s.merchant, n * expect.merchant);
  for (const [i, destination] of s.destinations.entries())
    await balance(`split ${SPLITS[i]?.label}`, destination, n * (expect.splits[i] ?? -1n));
  await balance("receiving wallet", s.receiving, 0n);

  const paidBy = new Set<string>();
  for (const { payment, settlement, paidBy: transfer } of s.settled) {
    const at = `${s.name}: payment ${payment.id}`;
    if (!same(payment.txHash, transfer) || paidBy.has(transfer.toLowerCase()))
      problems.push(`${at} forwarded by ${payment.txHash}, not its own transfer ${transfer}`);
    paidBy.add(transfer.toLowerCase());
    if (settlement.createdAt !== payment.updatedAt)
      problems.push(`${at}: settled at ${settlement.createdAt} but forwarded at ${payment.updatedAt}`);
    if (!same(settlement.merchantWallet, s.merchant) || units(settlement.merchantAmount) !== expect.merchant)
      problems.push(`${at}: merchant part ${settlement.merchantAmount} to ${settlement.merchantWallet}`);
    const fee = payment.settlementTxHashes?.fee;
    const merchantTx = settlement.txRef;
    if (!fee || !merchantTx) problems.push(`${at}: merchant or fee leg without a transaction`);
    const legs = [merchantTx, fee, ...settlement.splits.map((x) => x.txRef)];
    if (settlement.splits.length !== s.destinations.length)
      problems.push(`${at}: ${settlement.splits.length} splits recorded, expected ${s.destinations.length}`);
    for (const [i, split] of settlement.splits.entries()) {
      const destination = s.destinations[i] ?? "";
      if (
        split.label !== SPLITS[i]?.label ||
        !same(split.destination, destination) ||
        units(split.amount) !== expect.splits[i] ||
        split.status !== "sent" ||
        !split.txRef
      )
        problems.push(`${at}: split ${i} recorded as ${JSON.stringify(split)}`);
    }
    // D15: one transaction per leg from the EOA; one (the user operation's) for all from the smart wallet.
    const distinct = new Set(legs.map((tx) => tx?.toLowerCase())).size;
    const wanted = s.kind === "eoa" ? legs.length : 1;
    if (distinct !== wanted)
      problems.push(`${at}: ${distinct} settlement transactions for ${legs.length} legs`);
  }
  return problems;
}
