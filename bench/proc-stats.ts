import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { availableParallelism } from "node:os";
import { join } from "node:path";

// What the benches read from /proc (Linux): a process's memory and CPU time, the whole machine's
// CPU time, and PostgreSQL's processes. CPU times are in USER_HZ ticks, 100 per second on Linux.

export const TICKS_PER_SECOND = 100;

/** A field of /proc/<pid>/status in KiB (VmHWM: the peak resident set), or undefined when gone. */
export function procStatusKiB(pid: number, field: "VmHWM" | "VmRSS"): number | undefined {
  try {
    const match = new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(
      readFileSync(`/proc/${pid}/status`, "utf8"),
    );
    return match?.[1] ? Number(match[1]) : undefined;
  } catch {
    return undefined;
  }
}

/** Resets a process's VmHWM to its current RSS (clear_refs 5); false when that is not permitted. */
export function resetPeak(pid: number): boolean {
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, "5");
    return true;
  } catch {
    return false;
  }
}

/** The fields of /proc/<pid>/stat after the command name (which is in parentheses, may hold spaces). */
function statFields(pid: number | string): string[] {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  return stat.slice(stat.lastIndexOf(")") + 2).split(" ");
}

/** utime + stime of a process (all its threads), or undefined when it is gone. */
export function processTicks(pid: number): number | undefined {
  try {
    const fields = statFields(pid);
    return Number(fields[11]) + Number(fields[12]);
  } catch {
    return undefined;
  }
}

/** The whole machine's busy and total CPU ticks so far (/proc/stat; zeros where there is none). */
export function machineTicks(): { busy: number; total: number } {
  let line = "";
  try {
    line = readFileSync("/proc/stat", "utf8").split("\n")[0] ?? "";
  } catch {
    // not Linux
  }
  const [user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0] = line
    .trim()
    .split(/\s+/)
    .slice(1)
    .map(Number);
  const busy = user + nice + system + irq + softirq + steal;
  return { busy, total: busy + idle + iowait };
}

/** How many cores the whole machine kept busy between two readings of `machineTicks`. */
export function busyCores(
  before: { busy: number; total: number },
  after: { busy: number; total: number },
): number {
  return ((after.busy - before.busy) / Math.max(1, after.total - before.total)) * availableParallelism();
}

/** CPU per unit of work over a measured window: the service's, PostgreSQL's and this process's (ms). */
export interface CpuPerUnit {
  serviceMs: number;
  postgresMs: number;
  benchMs: number;
  /** Cores the whole machine kept busy over the window, and how many it has. */
  machineBusy: number;
  cores: number;
}

/**
 * A window over the service process and a PostgreSQL server's processes: `open` starts it (the
 * backends are read then, so a pool opened during a warm-up counts), `close(units)` ends it.
 */
export function cpuWindow(servicePid: number, pgDir: string) {
  let pgPids: number[] = [];
  let before = snapshot([]);
  let bench = process.cpuUsage();
  return {
    open(): void {
      pgPids = postgresPids(pgDir);
      before = snapshot([servicePid, ...pgPids]);
      bench = process.cpuUsage();
    },
    close(units: number): CpuPerUnit {
      const after = snapshot([servicePid, ...pgPids]);
      const used = process.cpuUsage(bench);
      const per = (ticks: number) => (ticks * 1000) / TICKS_PER_SECOND / Math.max(1, units);
      return {
        serviceMs: per(spent(before, after, [servicePid])),
        postgresMs: per(spent(before, after, pgPids)),
        benchMs: (used.user + used.system) / 1000 / Math.max(1, units),
        machineBusy: busyCores(before.machine, after.machine),
        cores: availableParallelism(),
      };
    },
  };
}

/** The postmaster of a data folder and its children (backends, WAL writer, checkpointer…). */
export function postgresPids(pgDir: string | undefined): number[] {
  if (!pgDir) return [];
  let postmaster: number;
  try {
    postmaster = Number(readFileSync(join(pgDir, "postmaster.pid"), "utf8").split("\n")[0]);
  } catch {
    return [];
  }
  const pids = [postmaster];
  for (const entry of readdirSync("/proc")) {
    if (!/^[0-9]+$/.test(entry)) continue;
    try {
      if (Number(statFields(entry)[1]) === postmaster) pids.push(Number(entry));
    } catch {
      // exited meanwhile
    }
  }
  return pids;
}

export interface CpuSnapshot {
  at: number;
  machine: { busy: number; total: number };
  processes: Map<number, number>;
}

export function snapshot(pids: number[]): CpuSnapshot {
  const processes = new Map<number, number>();
  for (const pid of pids) {
    const ticks = processTicks(pid);
    if (ticks !== undefined) processes.set(pid, ticks);
  }
  return { at: performance.now(), machine: machineTicks(), processes };
}

/** Ticks a group of processes spent between two snapshots (processes born meanwhile count whole). */
export function spent(before: CpuSnapshot, after: CpuSnapshot, pids: number[]): number {
  let sum = 0;
  for (const pid of pids) {
    const end = after.processes.get(pid);
    if (end !== undefined) sum += end - (before.processes.get(pid) ?? 0);
  }
  return sum;
}

/**
 * Waits up to `seconds` until the machine's busy share is at most `quietBusy`; the share seen
 * last. With 0 seconds it does not look at all (answers NaN).
 */
export async function waitForQuiet(
  label: string,
  seconds: number,
  quietBusy: number,
  log: (message: string) => void,
): Promise<number> {
  if (seconds === 0) return Number.NaN;
  const pct = (ratio: number) => `${(ratio * 100).toFixed(0)}%`;
  const deadline = Date.now() + seconds * 1000;
  let warned = false;
  for (;;) {
    const before = machineTicks();
    await new Promise<void>((done) => setTimeout(done, 1_000));
    const after = machineTicks();
    const busy = (after.busy - before.busy) / Math.max(1, after.total - before.total);
    if (busy <= quietBusy) return busy;
    if (Date.now() > deadline) {
      log(`${label}: the machine is still ${pct(busy)} busy with other processes; measuring anyway`);
      return busy;
    }
    if (!warned) {
      log(`${label}: the machine is ${pct(busy)} busy with other processes; waiting for it to calm down…`);
      warned = true;
    }
  }
}
