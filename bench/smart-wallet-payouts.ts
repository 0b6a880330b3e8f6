import type { Address } from "viem";
import { type Devnet, startDevnet } from "../src/devnet/chain.ts";
import { bearer, createWorkspace, startTestApp, type TestApp } from "../test/support/app.ts";
import { devnetClients } from "../test/support/devnet-clients.ts";
import { creditToken } from "../test/support/devnet-credit.ts";
import { liveSmartWalletEnv } from "../test/support/devnet-env.ts";
import {
  benchPaymaster,
  envInt,
  type Goal,
  goalLines,
  type LatencySummary,
  QUICK,
  QUICK_NOTE,
  QUICK_TAG,
  runAsScript,
  summarize,
} from "./support.ts";

// Time from payout request to response, EOA vs smart wallet (ERC-4337: user operation through the
// Alto bundler, gas sponsored by the devnet paymaster), on a devnet started with
// `accountAbstraction: true` (defaults: automine plus a block every second), in-process app
// (`startTestApp`, in-memory PGlite unless DATABASE_URL is set). 50 sequential payouts each, EOA
// and smart wallet alternating, after a warm-up (the first smart wallet payout also deploys the
// account: reported on its own).
// Goal: smart wallet p50 within 2× of the EOA path. Smart wallet payouts are measured as
// `npm run devnet` configures them (LIVE_BUNDLER_INSTANT_BUNDLING: the devnet's Alto bundles an
// operation at once), then once more with the standard send that any bundler takes, for reference.
//
// `node bench/smart-wallet-payouts.ts` prints a markdown table. BENCH_SW_PAYOUTS overrides 50
// (BENCH_QUICK=1: 10, after one warm-up pair instead of three).

const DESTINATION = "0x2222222222222222222222222222222222222222";
const GOAL_RATIO = 2;

const log = (message: string) => process.stderr.write(`[bench:smart-wallet] ${message}\n`);

export interface SmartWalletPayoutFigures {
  payouts: number;
  eoa: LatencySummary;
  smartWallet: LatencySummary;
  /** Smart wallet payouts sent with eth_sendUserOperation (a bundler without instant bundling). */
  standardSend: LatencySummary;
  /** The first smart wallet payout, which deploys the account (initCode) in its user operation. */
  firstSmartWalletMs: number;
  ratioP50: number;
  goal: Goal;
}

export async function benchSmartWalletPayouts(): Promise<SmartWalletPayoutFigures> {
  const count = envInt("BENCH_SW_PAYOUTS", QUICK ? 10 : 50);
  const warmups = QUICK ? 1 : 3;
  let devnet: Devnet | undefined;
  let t: TestApp | undefined;
  let standardApp: TestApp | undefined;
  try {
    log("starting the devnet with the ERC-4337 stack");
    devnet = await startDevnet({ accountAbstraction: true });
    const aa = devnet.aa;
    if (!aa) throw new Error("startDevnet({ accountAbstraction: true }) returned no aa");
    const env = liveSmartWalletEnv(devnet, aa, {}, benchPaymaster());
    // As `npm run devnet` configures it: the devnet's Alto bundles an operation when asked.
    t = await startTestApp({ ...env, LIVE_BUNDLER_INSTANT_BUNDLING: "true" });
    const app = t;
    // The same database and workspace, through a second app that sends as to any bundler.
    standardApp = await startTestApp(env, { database: t.database });
    const ws = await createWorkspace(app);
    const created = await app.request({
      method: "POST",
      url: `/api/v1/workspaces/${ws.id}/smart-wallet`,
      headers: bearer(ws.liveKey),
    });
    if (created.statusCode !== 200 && created.statusCode !== 201)
      throw new Error(`smart wallet creation failed: ${created.statusCode} ${created.body}`);
    const smart = created.json().smartWallet.address as Address;

    // Funding: USDC and ETH (gas) for the EOA from the payer; USDC minted to the smart wallet,
    // which needs no ETH (the paymaster sponsors its gas).
    // The workspace's own money: a payer's transfer would be held in the unmatched inbox.
    await devnetClients(devnet).credit(ws.eoaAddress, { USDC: "1000", ETH: "5" });
    await creditToken(devnet, "USDC", smart, "1000");

    const payout = async (walletType: "eoa" | "smart_wallet", through: TestApp = app) => {
      const begin = performance.now();
      const res = await through.request({
        method: "POST",
        url: "/api/v1/payouts",
        headers: bearer(ws.liveKey),
        payload: { tokenSymbol: "USDC", amount: "0.01", destinationAddress: DESTINATION, walletType },
      });
      const elapsed = performance.now() - begin;
      if (res.statusCode !== 200 || res.json().payout?.status !== "completed")
        throw new Error(`${walletType} payout failed: ${res.statusCode} ${res.body.slice(0, 500)}`);
      return elapsed;
    };

    log("warm-up (the first smart wallet payout deploys the account)");
    const firstSmartWalletMs = await payout("smart_wallet");
    for (let i = 0; i < warmups; i++) {
      await payout("eoa");
      await payout("smart_wallet");
    }
    // Alternated, so that both paths are timed under the same load of this shared machine: run
    // one after the other, a drift of its load between the two runs moved the ratio by ±0.3.
    log(`${count} EOA and ${count} smart wallet payouts, one after the other, alternating`);
    const eoaTimes: number[] = [];
    const smartTimes: number[] = [];
    for (let i = 0; i < count; i++) {
      eoaTimes.push(await payout("eoa"));
      smartTimes.push(await payout("smart_wallet"));
    }
    log(`${count} sequential smart wallet payouts, standard send (eth_sendUserOperation)`);
    await payout("smart_wallet", standardApp);
    const standardTimes: number[] = [];
    for (let i = 0; i < count; i++) standardTimes.push(await payout("smart_wallet", standardApp));

    const eoa = summarize(eoaTimes);
    const smartWallet = summarize(smartTimes);
    const ratioP50 = smartWallet.p50 / eoa.p50;
    return {
      payouts: count,
      eoa,
      smartWallet,
      standardSend: summarize(standardTimes),
      firstSmartWalletMs,
      ratioP50,
      goal: {
        text: `smart wallet p50 within ${GOAL_RATIO}× of the EOA: ${smartWallet.p50.toFixed(0)} ms vs ${eoa.p50.toFixed(0)} ms = ${ratioP50.toFixed(2)}×`,
        met: ratioP50 <= GOAL_RATIO,
      },
    };
  } finally {
    await standardApp?.close(true);
    await t?.close();
    await devnet?.stop();
  }
}

export function renderSmartWalletTable(f: SmartWalletPayoutFigures): string {
  const ms = (n: number) => n.toFixed(0);
  const row = (name: string, s: LatencySummary) =>
    `| ${name} | ${f.payouts} | ${ms(s.p50)} | ${ms(s.p99)} | ${ms(s.mean)} | ${ms(s.min)} | ${ms(s.max)} |`;
  return [
    `| Payout from${QUICK_TAG} | Payouts (sequential) | p50 ms | p99 ms | mean ms | min ms | max ms |`,
    "| :-- | --: | --: | --: | --: | --: | --: |",
    row("EOA (signed transaction)", f.eoa),
    row("Smart wallet (user operation, sponsored; instant bundling)", f.smartWallet),
    row("Smart wallet, standard send (eth_sendUserOperation, receipt polled)", f.standardSend),
    "",
    `First smart wallet payout (deploys the account): ${ms(f.firstSmartWalletMs)} ms. Smart wallet / EOA at p50: ${f.ratioP50.toFixed(2)}× (goal ≤ ${GOAL_RATIO}×).`,
    "",
    ...goalLines([f.goal]),
  ].join("\n");
}

await runAsScript(import.meta.url, log, async () => {
  const figures = await benchSmartWalletPayouts();
  process.stdout.write(
    `\n${renderSmartWalletTable(figures)}\n\nDevnet (Hardhat node + Alto bundler), app and database on one 2-core machine shared with other processes.\n${QUICK ? `\n${QUICK_NOTE}\n` : ""}`,
  );
});
