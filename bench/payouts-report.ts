import type { LiveFigures, SandboxFigures } from "./payouts.ts";
import { type Goal, goalLines, QUICK_TAG } from "./support.ts";

// bench/payouts.ts's goals (issue 43) and its table: each figure with its goal beside it.

/** Issue 43: sandbox payouts/s at 32 connections; live payouts/s over the node's own transfers/s. */
export const GOALS = { sandboxPayoutsPerSecond: 3_000, liveOfNode: 0.75 };

export interface PayoutBenchFigures {
  sandbox?: SandboxFigures;
  live?: LiveFigures;
  liveEth?: LiveFigures;
  liveBlocks?: LiveFigures;
  goals: Goal[];
}

const fmt = (n: number, digits = 0) => n.toLocaleString("en-US", { maximumFractionDigits: digits });
const fmtPct = (ratio: number) => `${(ratio * 100).toFixed(0)}%`;

export function sandboxGoal(sandbox: SandboxFigures): Goal {
  return {
    text: `sandbox ≥ ${fmt(GOALS.sandboxPayoutsPerSecond)} payouts/s at ${sandbox.connections} connections: ${fmt(sandbox.payoutsPerSecond)}${sandbox.failed > 0 ? `, ${sandbox.failed} failed` : ""}`,
    met: sandbox.payoutsPerSecond >= GOALS.sandboxPayoutsPerSecond && sandbox.failed === 0,
  };
}

/** The live payouts' rate over the node's own, measured in the same run. */
const liveRatio = (live: LiveFigures) => live.payoutsPerSecond / live.nodeTransfersPerSecond;

export function liveGoal(live: LiveFigures): Goal {
  return {
    text: `live payouts from one wallet ≥ ${fmtPct(GOALS.liveOfNode)} of the node's own transfers/s: ${fmt(live.payoutsPerSecond, 1)} vs ${fmt(live.nodeTransfersPerSecond, 1)} = ${fmtPct(liveRatio(live))}${live.succeeded < live.payouts ? `, ${live.payouts - live.succeeded} failed` : ""}`,
    met: liveRatio(live) >= GOALS.liveOfNode && live.succeeded === live.payouts,
  };
}

export function renderPayoutTable(f: PayoutBenchFigures): string {
  const met = (goal: Goal) => (goal.met ? "met" : "missed");
  const rows = [
    `| Scenario${QUICK_TAG} | Payouts/s | p50 ms | p99 ms | Payouts | Failed | Goal | Met |`,
    "| :-- | --: | --: | --: | --: | --: | :-- | :-- |",
  ];
  const latency = (l: LiveFigures) =>
    `${fmt(l.payoutsPerSecond, 1)} | ${fmt(l.latency.p50, 0)} | ${fmt(l.latency.p99, 0)} | ${l.payouts} | ${l.payouts - l.succeeded}`;
  if (f.sandbox) {
    const s = f.sandbox;
    rows.push(
      `| Sandbox, ${s.connections} connections, ${s.workspaces} workspaces, ${s.seconds} s (child process, PostgreSQL) | ${fmt(s.payoutsPerSecond)} | ${fmt(s.p50Ms, 2)} | ${fmt(s.p99Ms, 2)} | ${fmt(s.requests)} | ${s.failed} | ≥ ${fmt(GOALS.sandboxPayoutsPerSecond)}/s | ${met(sandboxGoal(s))} |`,
    );
  }
  if (f.live) {
    const l = f.live;
    rows.push(
      `| Live, ${l.payouts} concurrent from one EOA, automine (in-process, ${l.database}) | ${latency(l)} | ≥ ${fmtPct(GOALS.liveOfNode)} of the node's: ${fmtPct(liveRatio(l))} | ${met(liveGoal(l))} |`,
      `| Node alone: ${l.payouts} USDC transfers from one account, sent in nonce order (the better of a run before and one after the payouts) | ${fmt(l.nodeTransfersPerSecond, 1)} | | | ${l.payouts} | | (reference, same run) | |`,
    );
  }
  if (f.liveEth) {
    const e = f.liveEth;
    rows.push(
      `| Live, ${e.payouts} concurrent ETH payouts from one EOA, automine (in-process, ${e.database}) | ${latency(e)} | (no goal) | |`,
    );
  }
  if (f.liveBlocks) {
    const b = f.liveBlocks;
    rows.push(
      `| Live, ${b.payouts} concurrent from one EOA, a block every second, no automine (in ${b.blocks} blocks) | ${latency(b)} | (pipeline; one at a time: ${b.payouts} blocks) | |`,
    );
  }
  return [
    ...rows,
    "",
    ...(f.sandbox
      ? [
          `Sandbox CPU per payout: the service ${f.sandbox.cpu.serviceMs.toFixed(3)} ms, PostgreSQL ${f.sandbox.cpu.postgresMs.toFixed(3)} ms, autocannon (this process) ${f.sandbox.cpu.benchMs.toFixed(3)} ms; the machine was busy ${f.sandbox.cpu.machineBusy.toFixed(2)} of its ${f.sandbox.cpu.cores} cores over the window.`,
          "",
        ]
      : []),
    ...(f.live
      ? [
          `Live wall time ${fmt(f.live.wallMs)} ms for ${f.live.payouts} payouts; the node alone took ${fmt(f.live.nodeWallMs)} ms. The app's process used ${f.live.cpuMsPerPayout.toFixed(2)} ms of CPU per payout (${f.live.cores.toFixed(2)} cores over the window) on a machine the devnet and PostgreSQL share.`,
          "",
        ]
      : []),
    ...goalLines(f.goals),
  ].join("\n");
}
