// The cost of metrics (issue 21): bench/run.ts measures the service with metrics off, on, on,
// off (ABBA: a table that grows from run to run weighs on both sides alike; BENCH_METRICS_ROUNDS
// repeats the round), and this renders the comparison of the means. The server's CPU time per
// request is shown beside req/s: on this shared 2-core machine it moves less with other load. The goal: with metrics on (METRICS_TOKEN set, every request timed,
// every counter counted), create and GET stay within 3% of the same run with them off.

export interface OverheadSample {
  rps: number;
  p99: number;
  cpuMsPerRequest: number;
}

export interface OverheadRow {
  database: string;
  endpoint: string;
  off: OverheadSample[];
  on: OverheadSample[];
}

export const OVERHEAD_GOAL = 0.97;

const mean = (values: number[]) => values.reduce((sum, v) => sum + v, 0) / Math.max(values.length, 1);
const rps = (value: number) => Math.round(value).toLocaleString("en-US");

export function renderOverhead(rows: OverheadRow[]): { lines: string[]; met: boolean } {
  let met = true;
  const body = rows.map((row) => {
    const off = mean(row.off.map((s) => s.rps));
    const on = mean(row.on.map((s) => s.rps));
    const ratio = on / off;
    met &&= ratio >= OVERHEAD_GOAL;
    const cpu = (samples: OverheadSample[]) => mean(samples.map((s) => s.cpuMsPerRequest)).toFixed(3);
    return `| ${row.database} | ${row.endpoint} | ${row.off.map((s) => rps(s.rps)).join(" / ")} | ${row.on.map((s) => rps(s.rps)).join(" / ")} | ${(ratio * 100).toFixed(1)}% | ${mean(row.off.map((s) => s.p99)).toFixed(0)} | ${mean(row.on.map((s) => s.p99)).toFixed(0)} | ${cpu(row.off)} | ${cpu(row.on)} | ${ratio >= OVERHEAD_GOAL ? "yes" : "no"} |`;
  });
  return {
    met,
    lines: [
      "### Metrics on / off",
      "",
      "The service again with metrics on (`METRICS_TOKEN` set) and off, in rounds of off, on, on, off (the first run is the one above); the means compared. Goal: on ≥ 97% of off req/s.",
      "",
      "| Database | Endpoint | Off req/s | On req/s | On / off | Off p99 ms | On p99 ms | Off server CPU ms/req | On server CPU ms/req | Met |",
      "| :-- | :-- | --: | --: | --: | --: | --: | --: | --: | :-- |",
      ...body,
      "",
      met ? "Metrics cost no more than 3% of req/s." : "**Metrics cost more than 3% of req/s somewhere.**",
    ],
  };
}
