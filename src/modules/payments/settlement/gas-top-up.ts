import type { FastifyBaseLogger } from "fastify";
import { privateKeyToAccount } from "viem/accounts";
import type { Hex, Network } from "../../../chain/network.ts";
import type { SubmitOptions } from "../../../chain/sent-types.ts";
import type { TransactionSender } from "../../../chain/transaction-sender.ts";
import type { NetworkConfig } from "../../../config.ts";
import type { Metrics } from "../../../platform/metrics/metrics.ts";

// Keeps workspace EOAs able to pay gas for ERC-20 settlements and payouts (and x402 facilitator
// wallets for their settlements, D23): a wallet below the
// threshold gets ETH from the gas-funding account, up to the target. The job runs once per
// interval on one instance; each top-up is a recorded transaction (purpose "gas_topup") and a log line.

const GAS_TOP_UP = "gas_topup";

export async function topUpGas(
  network: Network,
  config: NetworkConfig,
  sender: TransactionSender,
  /** Every wallet the service pays gas from: workspace EOAs and x402 facilitator wallets. */
  gasPayers: () => Promise<string[]>,
  log: FastifyBaseLogger,
  metrics: Metrics,
  /** Fences the top-ups on the job's lease (PeriodicJob.leaseFence). */
  options: SubmitOptions = {},
): Promise<number> {
  if (!config.gasFunderKey) return 0;
  const funderKey = config.gasFunderKey as Hex;
  const funder = privateKeyToAccount(funderKey).address;
  const addresses = await gasPayers();
  const balances = await Promise.all(addresses.map((a) => network.balance(a as Hex, "ETH")));
  // A wallet whose top-up is still on its way is not sent a second one.
  const onTheirWay = await sender.openRecipients(GAS_TOP_UP);
  const transfers = addresses
    .map((address, i) => ({ address, balance: balances[i] ?? 0n }))
    .filter((w) => w.balance < config.gasTopUpThreshold && !onTheirWay.has(w.address.toLowerCase()))
    .map((w) => ({
      token: "ETH" as const,
      to: w.address as Hex,
      amount: config.gasTopUpTarget - w.balance,
      purpose: GAS_TOP_UP,
    }));
  if (transfers.length === 0) return 0;
  const sent = await sender.send(funderKey, funder, transfers, options);
  for (const [i, s] of sent.entries()) {
    metrics.gasTopUp(network.environment, topUpOutcome(s.status));
    log.info(
      {
        to: transfers[i]?.to,
        amountWei: transfers[i]?.amount.toString(),
        txHash: s.txHash,
        status: s.status,
      },
      "gas top-up",
    );
  }
  return sent.filter((s) => s.status === "success").length;
}

/**
 * What a top-up of one wallet came to: it holds enough now; the top-up is sent and not mined yet
 * (it may still be); or none can be had (no gas funder, or the top-up failed).
 */
export type TopUpResult = "funded" | "pending" | "unavailable";

/**
 * Tops up one wallet right away so that it holds at least `needed` wei (settlement calls this
 * instead of failing a payment whose wallet the periodic job has not funded yet).
 */
export async function topUpWallet(
  network: Network,
  config: NetworkConfig,
  sender: TransactionSender,
  address: Hex,
  needed: bigint,
  log: FastifyBaseLogger,
  metrics: Metrics,
  options: SubmitOptions = {},
): Promise<TopUpResult> {
  if (!config.gasFunderKey) return "unavailable";
  const funderKey = config.gasFunderKey as Hex;
  const balance = await network.balance(address, "ETH");
  if (balance >= needed) return "funded";
  if ((await sender.openRecipients(GAS_TOP_UP)).has(address.toLowerCase())) return "pending";
  const target = needed > config.gasTopUpTarget ? needed : config.gasTopUpTarget;
  const [sent] = await sender.send(
    funderKey,
    privateKeyToAccount(funderKey).address,
    [{ token: "ETH", to: address, amount: target - balance, purpose: GAS_TOP_UP }],
    options,
  );
  if (sent) metrics.gasTopUp(network.environment, topUpOutcome(sent.status));
  log.info(
    { to: address, amountWei: (target - balance).toString(), txHash: sent?.txHash, status: sent?.status },
    "gas top-up",
  );
  if (sent?.status === "success") return "funded";
  return sent?.status === "not_found" ? "pending" : "unavailable";
}

/** A top-up's receipt, as the metrics name it: one not mined in time is still pending. */
function topUpOutcome(status: string): string {
  return status === "not_found" ? "pending" : status;
}
