import { privateKeyToAccount } from "viem/accounts";
import type { App } from "./app.ts";
import { expireDuePayments } from "./modules/payments/expiry.ts";
import { ChainWatcher } from "./modules/payments/incoming/chain-watcher.ts";
import { topUpGas, topUpWallet } from "./modules/payments/settlement/gas-top-up.ts";
import { Settlement } from "./modules/payments/settlement/settlement.ts";
import { compactPaymentTotals } from "./modules/payments/totals.ts";
import { AgentPaymentOutcomes } from "./modules/wallets/agent-payment-outcomes.ts";
import { type DispatcherOptions, WebhookDispatcher } from "./modules/webhooks/dispatcher.ts";
import { PeriodicJob, type PeriodicJobOptions } from "./platform/jobs/periodic-job.ts";

// Background work of one process: webhook delivery (any number of instances share it through
// SKIP LOCKED) and single-leader periodic jobs: per configured network, the chain watcher plus
// settlement; payment expiry; gas top-ups; folding the payment totals' deltas; finishing card
// refunds left pending at the card provider; asking the card provider about on-ramp sessions
// whose events were lost; deleting swap quotes nobody executed.

export interface Workers {
  dispatcher: WebhookDispatcher;
  jobs: PeriodicJob[];
  start(): void;
  stop(): Promise<void>;
}

const EXPIRY_INTERVAL_MS = 5_000; // D13: expired within 10 s
/** Agents' x402 authorizations: used ones become spends, lapsed ones release their reservation (D23). */
const AGENT_PAYMENTS_INTERVAL_MS = 2_000;
const GAS_TOP_UP_INTERVAL_MS = 60_000;
/** The payment totals' deltas are folded this often: reads sum at most this long's deltas. */
const TOTALS_INTERVAL_MS = 5_000;
/** Card refunds left pending (provider unreachable, or not final there) are looked at this often. */
const CARD_REFUNDS_INTERVAL_MS = 30_000;
/** On-ramp sessions quiet for 10 minutes are asked about this often (onramp/reconcile.ts). */
const ONRAMP_SESSIONS_INTERVAL_MS = 60_000;
/** Swap quotes past their 30 s and never executed are deleted this often (an hour after expiry). */
const QUOTES_INTERVAL_MS = 600_000;

export function createWorkers(app: App, options: { dispatcher?: DispatcherOptions } = {}): Workers {
  const { ctx } = app;
  const dispatcher = new WebhookDispatcher(ctx, options.dispatcher);
  const totalsState = { foldedSinceVacuum: 0 };
  const agentPayments = new AgentPaymentOutcomes(ctx, app.services.ledger);
  const newJob = (options: PeriodicJobOptions) =>
    new PeriodicJob(ctx.db, ctx.log, { minLeaseMs: ctx.config.jobLeaseSeconds * 1000, ...options });
  const jobs: PeriodicJob[] = [
    newJob({
      name: "payments.expiry",
      intervalMs: EXPIRY_INTERVAL_MS,
      tick: async () => {
        await expireDuePayments(ctx.db, ctx.now(), ctx.metrics);
      },
    }),
    newJob({
      name: "agents.x402-authorizations",
      intervalMs: AGENT_PAYMENTS_INTERVAL_MS,
      tick: async () => {
        await agentPayments.tick();
      },
    }),
    newJob({
      name: "swaps.quotes",
      intervalMs: QUOTES_INTERVAL_MS,
      tick: async () => {
        await app.services.swaps.forgetExpiredQuotes();
      },
    }),
    newJob({
      name: "payments.totals",
      intervalMs: TOTALS_INTERVAL_MS,
      tick: async () => {
        await compactPaymentTotals(ctx.db, totalsState);
      },
    }),
  ];
  if (ctx.config.card.sandbox || ctx.config.card.live) {
    jobs.push(
      newJob({
        name: "card.refunds",
        intervalMs: CARD_REFUNDS_INTERVAL_MS,
        tick: async () => {
          await app.services.cardRefunds.reconcile();
        },
      }),
      newJob({
        name: "onramp.sessions",
        intervalMs: ONRAMP_SESSIONS_INTERVAL_MS,
        tick: async () => {
          await app.services.onramp.reconcile();
        },
      }),
    );
  }
  for (const { config, network, sender } of ctx.chains.all()) {
    const rails = app.rails.of(network.environment, network.id);
    if (!rails?.eoa) continue;
    const eoa = rails.eoa;
    const funder = config.gasFunderKey
      ? [privateKeyToAccount(config.gasFunderKey as `0x${string}`).address]
      : [];
    // Each network's jobs are its own (D22): one whose node is down delays no other. The default
    // network's keep their names from before networks (`chain.live`), so that a rolling upgrade
    // leaves one leader.
    const suffix = config.id === ctx.chains.defaultOf(network.environment)?.config.id ? "" : `.${config.id}`;
    const watcher = new ChainWatcher(ctx.db, network, ctx.log, ctx.now, {
      ignoredSenders: funder,
      // A swap's proceeds reach its wallet from the public router: the service's own are not payments.
      ownTransactions: (transfers) => app.services.swaps.ownSwapTransactions(network, transfers),
      // An on-ramp's delivery is credited to its session (onramp/confirm.ts), not taken for a payment.
      deliveries: (transfers) => app.services.onramp.deliveries(network, transfers),
      pollIntervalMs: config.pollIntervalMs,
      metrics: ctx.metrics,
    });
    // The jobs are made first: settlement and top-ups fence their sends on their job's lease.
    const chainJob: PeriodicJob = newJob({
      name: `chain.${network.environment}${suffix}`,
      intervalMs: config.pollIntervalMs,
      // Another instance leads the chain job: its watcher's lag and tick age are the ones to report.
      onNotLeading: () => ctx.metrics.chainWatcherStoodDown(network),
      tick: () =>
        chainTick({
          reconcile: () => app.services.transfers.reconcile(network),
          watch: () => watcher.tick(),
          settle: () => settlement.tick(),
          confirmOnramp: () => app.services.onramp.confirm(network),
        }),
    });
    const topUpJob: PeriodicJob = newJob({
      name: `gas-top-up.${network.environment}${suffix}`,
      intervalMs: GAS_TOP_UP_INTERVAL_MS,
      tick: async () => {
        const gasPayers = async () => [
          ...(await app.services.workspaces.allEoaAddresses()),
          ...(await app.services.x402.facilitatorAddresses()),
        ];
        await topUpGas(network, config, sender, gasPayers, ctx.log, ctx.metrics, {
          fences: [topUpJob.leaseFence()],
        });
      },
    });
    const lease = chainJob.leaseFence();
    const topUp = (address: `0x${string}`, needed: bigint) =>
      topUpWallet(network, config, sender, address, needed, ctx.log, ctx.metrics, { fences: [lease] });
    const settlement = new Settlement(
      ctx.db,
      network,
      { eoa, smart_wallet: rails.smart_wallet },
      app.services.transfers,
      ctx.log,
      ctx.now,
      { topUp, lease, metrics: ctx.metrics },
    );
    jobs.push(chainJob, topUpJob);
  }
  return {
    dispatcher,
    jobs,
    start() {
      dispatcher.start();
      for (const job of jobs) job.start();
    },
    async stop() {
      await Promise.all([dispatcher.stop(), ...jobs.map((job) => job.stop())]);
    },
  };
}

/**
 * One tick of a network's chain job. The engine's reconcile (what its rails left open, the
 * transfers nobody is sending) comes before the settlement, so that settlement records on the
 * payments what ended meanwhile; it runs before the watcher too, so that a payment the watcher
 * confirms is settled right after, not after the reconcile's reads. The watcher runs whether or
 * not the reconcile failed (its bundler or node down), as it did when it came first; a failed
 * reconcile skips the settlement and fails the tick with its error, as before.
 */
export async function chainTick(steps: {
  reconcile(): Promise<unknown>;
  watch(): Promise<unknown>;
  settle(): Promise<unknown>;
  confirmOnramp(): Promise<unknown>;
}): Promise<void> {
  const reconciled = await steps.reconcile().then(
    () => ({ failed: false as const }),
    (error: unknown) => ({ failed: true as const, error }),
  );
  try {
    await steps.watch();
  } catch (err) {
    // Both failed (a node down fails both): the tick reports both errors, neither swallowed.
    throw reconciled.failed
      ? new AggregateError([reconciled.error, err], "the chain job's reconcile and watcher failed")
      : err;
  }
  if (reconciled.failed) throw reconciled.error;
  await steps.settle();
  await steps.confirmOnramp();
}
