import { formatAmount } from "../../domain/money.ts";
import type { OnrampRequest } from "../../domain/onramp-request.ts";

// What a sandbox on-ramp session delivers (D17: complete at once, on the simulated ledger), at
// documented rates: 1 USDC for 1 US dollar, 1 ETH for 3,000 US dollars (the sandbox pools' price,
// docs/swaps.md); no amount asked: 100 US dollars' worth.

const ETH_USD = 3_000n;
const DEFAULT_CENTS = 10_000n;
const WEI_PER_ETH = 10n ** 18n;
const USDC_UNITS_PER_CENT = 10_000n;

/** The crypto's smallest units, and the US dollars paid as the provider would state them. */
export function sandboxAmounts(request: OnrampRequest): { units: bigint; sourceAmount: string } {
  const eth = request.destinationCurrency === "ETH";
  if (request.destinationAmount !== null) {
    const units = request.destinationAmount;
    // What it cost, rounded up to the cent.
    const cents = eth ? ceilDiv(units * ETH_USD * 100n, WEI_PER_ETH) : ceilDiv(units, USDC_UNITS_PER_CENT);
    return { units, sourceAmount: formatAmount(cents, 2) };
  }
  const cents = request.sourceAmountCents ?? DEFAULT_CENTS;
  const units = eth ? (cents * WEI_PER_ETH) / (ETH_USD * 100n) : cents * USDC_UNITS_PER_CENT;
  return { units, sourceAmount: formatAmount(cents, 2) };
}

function ceilDiv(a: bigint, b: bigint): bigint {
  return (a + b - 1n) / b;
}
