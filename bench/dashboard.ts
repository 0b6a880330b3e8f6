import { randomBytes } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import pg from "pg";
import { encodeCursor } from "../src/platform/db/page.ts";
import { startPostgres, startService } from "./service-process.ts";
import { cleanups, envInt, type LatencySummary, runAsScript, summarize } from "./support.ts";

// The merchant dashboard with a workspace of 100,000 sandbox payments (spread over 60 days, every
// status, three tokens), the service run as a child process (`node src/main.ts`) on a throw-away
// PostgreSQL (scripts/local-postgres.sh), signed in like a browser (form login, session cookie).
// Measured one request at a time over keep-alive: the payments list's first page, a deep keyset
// page (the 90,000th payment onwards), the overview; then the CSV export of all 100,000 rows read
// to the end, with the service's peak resident memory during it (VmHWM after clear_refs, minus its
// resident size before).
// Goals: list (first and deep page) and overview p50 < 20 ms; export peak RSS growth < 50 MiB.
//
// `node bench/dashboard.ts` prints a markdown table. BENCH_DASHBOARD_PAYMENTS (100,000) and
// BENCH_DASHBOARD_REQUESTS (200 per page, after 30 warm-up) override the sizes.

const PASSWORD = "bench dashboard password";
const EMAIL = "bench@dashboard.example";
const GOALS = { pageP50Ms: 20, exportGrowthMiB: 50 };
const WARMUP = 30;

const log = (message: string) => process.stderr.write(`[bench:dashboard] ${message}\n`);
const steps = cleanups(log);

/** 100,000 payments in one statement: every status, three tokens, 60 days back from now. */
async function seed(databaseUrl: string, workspaceId: string, count: number): Promise<void> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    await client.query(
      `INSERT INTO payments (workspace_id, environment, status, payment_method, payment_provider, token_symbol,
         gross_amount, fee_amount, net_amount, merchant_wallet, wallet_type, receiving_address, description,
         metadata, expires_at, created_at, updated_at)
       SELECT $1, 'sandbox',
         (ARRAY['forwarded','forwarded','forwarded','pending','expired','cancelled','failed'])[1 + i % 7],
         'crypto', 'onchain', (ARRAY['USDC','ETH','ADAO'])[1 + i % 3],
         (1000000 + i * 37)::numeric, ((1000000 + i * 37) * 15 / 1000)::numeric,
         ((1000000 + i * 37) - (1000000 + i * 37) * 15 / 1000)::numeric,
         '0x1111111111111111111111111111111111111111', 'eoa', '0x2222222222222222222222222222222222222222',
         'Order #' || i || ' — ' || (ARRAY['coffee','tea','beans','grinder','filters'])[1 + i % 5],
         jsonb_build_object('order', i::text),
         now() - (i * interval '51 seconds') + interval '1 hour',
         now() - (i * interval '51 seconds'), now() - (i * interval '51 seconds')
       FROM generate_series(1, $2) AS i`,
      [workspaceId, count],
    );
    await client.query("ANALYZE payments");
  } finally {
    await client.end();
  }
}

/** The cursor of the payment at `offset` (newest first), as the list's "next" link carries it. */
async function cursorAt(databaseUrl: string, workspaceId: string, offset: number): Promise<string> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const { rows } = await client.query<{ key_at: string; id: string }>(
      `SELECT to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS key_at, id::text AS id
       FROM payments WHERE workspace_id = $1 AND environment = 'sandbox'
       ORDER BY created_at DESC, id DESC OFFSET $2 LIMIT 1`,
      [workspaceId, offset],
    );
    const row = rows[0];
    if (!row) throw new Error(`no payment at offset ${offset}`);
    return encodeCursor({ createdAt: row.key_at, id: row.id });
  } finally {
    await client.end();
  }
}

/** Signs in through the form like a browser; the session cookie. */
async function signIn(base: string): Promise<string> {
  const form = await fetch(`${base}/dashboard/login`);
  const loginCookie = (form.headers.get("set-cookie") ?? "").split(";")[0] ?? "";
  const token = /name="_csrf" value="([^"]+)"/.exec(await form.text())?.[1] ?? "";
  const res = await fetch(`${base}/dashboard/login`, {
    method: "POST",
    redirect: "manual",
    headers: { cookie: loginCookie, "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({ email: EMAIL, password: PASSWORD, _csrf: token }),
  });
  const session = /svc_session=[^;]+/.exec(res.headers.get("set-cookie") ?? "")?.[0];
  if (res.status !== 303 || !session) throw new Error(`login failed: ${res.status}`);
  return session;
}

async function timePage(base: string, cookie: string, path: string, expect: string, requests: number) {
  const times: number[] = [];
  for (let i = 0; i < WARMUP + requests; i++) {
    const begin = performance.now();
    const res = await fetch(`${base}${path}`, { headers: { cookie } });
    const body = await res.text();
    const elapsed = performance.now() - begin;
    if (res.status !== 200 || !body.includes(expect))
      throw new Error(`GET ${path}: ${res.status} ${body.slice(0, 300)}`);
    if (i >= WARMUP) times.push(elapsed);
  }
  return summarize(times);
}

function procStatusKiB(pid: number, field: "VmHWM" | "VmRSS"): number {
  const match = new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  if (!match?.[1]) throw new Error(`no ${field} for ${pid}`);
  return Number(match[1]);
}

export interface DashboardFigures {
  payments: number;
  pages: Array<{ name: string; requests: number; latency: LatencySummary }>;
  exportRows: number;
  exportBytes: number;
  exportSeconds: number;
  rssBeforeMiB: number;
  exportPeakMiB: number;
  /** Peak RSS growth of each of the three exports. */
  exportGrowthsMiB: number[];
  /** Whether clear_refs reset the peak (else the peak is the process lifetime's). */
  peakReset: boolean;
  goals: Array<{ text: string; met: boolean }>;
}

export async function benchDashboard(): Promise<DashboardFigures> {
  const count = envInt("BENCH_DASHBOARD_PAYMENTS", 100_000);
  const requests = envInt("BENCH_DASHBOARD_REQUESTS", 200);
  const databaseUrl = await startPostgres("dashboard", steps, log);
  const adminSecret = randomBytes(24).toString("hex");
  const service = await startService("dashboard", steps, { databaseUrl, adminSecret });
  const created = await fetch(`${service.base}/api/v1/workspaces`, {
    method: "POST",
    headers: { authorization: `Bearer ${adminSecret}`, "content-type": "application/json" },
    body: JSON.stringify({
      name: "Bench Roasters",
      adminEmail: EMAIL,
      adminPassword: PASSWORD,
      settlementAddress: "0x1111111111111111111111111111111111111111",
    }),
  });
  if (created.status !== 201) throw new Error(`workspace creation failed: ${created.status}`);
  const workspaceId = ((await created.json()) as { workspace: { id: string } }).workspace.id;
  log(`seeding ${count.toLocaleString("en-US")} payments`);
  await seed(databaseUrl, workspaceId, count);
  const deep = await cursorAt(databaseUrl, workspaceId, Math.floor(count * 0.9));
  const cookie = await signIn(service.base);

  const pages: DashboardFigures["pages"] = [];
  for (const [name, path, expect] of [
    ["payments list, first page", "/dashboard/sandbox/payments", "Older payments"],
    [
      `payments list, keyset page at ${Math.floor(count * 0.9).toLocaleString("en-US")}`,
      `/dashboard/sandbox/payments?after=${encodeURIComponent(deep)}`,
      'id="payments-table"',
    ],
    [
      "payments list, filtered (status + token + search)",
      "/dashboard/sandbox/payments?status=forwarded&tokenSymbol=USDC&search=beans",
      'id="payments-table"',
    ],
    ["overview", "/dashboard/sandbox", 'id="daily-chart"'],
  ] as const) {
    log(`${name}: ${WARMUP} warm-up + ${requests} requests`);
    pages.push({ name, requests, latency: await timePage(service.base, cookie, path, expect, requests) });
  }

  const pid = service.proc.pid;
  if (pid === undefined) throw new Error("no service pid");
  // Three exports one after the other: the peak of each over the resident size before it. The
  // first also pays for compiling the export's code; the figure kept is the median.
  const exports: Array<{
    growthKiB: number;
    rssBefore: number;
    peak: number;
    seconds: number;
    bytes: number;
    rows: number;
  }> = [];
  let peakReset = true;
  for (let round = 0; round < 3; round++) {
    const rssBefore = procStatusKiB(pid, "VmRSS");
    try {
      writeFileSync(`/proc/${pid}/clear_refs`, "5");
    } catch {
      peakReset = false;
    }
    log(`exporting every payment as CSV (${round + 1} of 3)`);
    const begin = performance.now();
    const res = await fetch(`${service.base}/dashboard/sandbox/payments/export.csv`, { headers: { cookie } });
    if (res.status !== 200 || !res.body) throw new Error(`export: ${res.status}`);
    let bytes = 0;
    let lines = 0;
    for await (const chunk of res.body) {
      bytes += chunk.length;
      for (const byte of chunk) if (byte === 10) lines++;
    }
    const peak = procStatusKiB(pid, "VmHWM");
    // A description has no line break here: each record is one line, after the header.
    if (lines - 1 !== count) throw new Error(`the export had ${lines - 1} rows, not ${count}`);
    exports.push({
      growthKiB: peak - rssBefore,
      rssBefore,
      peak,
      seconds: (performance.now() - begin) / 1000,
      bytes,
      rows: lines - 1,
    });
  }
  const median = [...exports].sort((a, b) => a.growthKiB - b.growthKiB)[1];
  if (!median) throw new Error("no export measured");
  const rssBefore = median.rssBefore;
  const peak = median.peak;
  const exportSeconds = median.seconds;
  const bytes = median.bytes;
  const exportRows = median.rows;
  log(`export growth per round (MiB): ${exports.map((e) => (e.growthKiB / 1024).toFixed(1)).join(", ")}`);
  const growthMiB = (peak - rssBefore) / 1024;
  const goals = [
    ...pages.map((p) => ({
      text: `${p.name}: p50 < ${GOALS.pageP50Ms} ms: ${p.latency.p50.toFixed(2)} ms`,
      met: p.latency.p50 < GOALS.pageP50Ms,
    })),
    {
      text: `CSV export of ${count.toLocaleString("en-US")} rows: peak RSS growth < ${GOALS.exportGrowthMiB} MiB: ${growthMiB.toFixed(1)} MiB`,
      met: growthMiB < GOALS.exportGrowthMiB,
    },
  ];
  return {
    payments: count,
    pages,
    exportRows,
    exportBytes: bytes,
    exportSeconds,
    rssBeforeMiB: rssBefore / 1024,
    exportPeakMiB: peak / 1024,
    exportGrowthsMiB: exports.map((e) => e.growthKiB / 1024),
    peakReset,
    goals,
  };
}

export function renderDashboardTable(f: DashboardFigures): string {
  const fmt = (n: number, digits = 2) => n.toLocaleString("en-US", { maximumFractionDigits: digits });
  return [
    `Workspace with ${f.payments.toLocaleString("en-US")} sandbox payments; service as a child process on PostgreSQL.`,
    "",
    "| Page | Requests | p50 ms | mean ms | p99 ms |",
    "| :-- | --: | --: | --: | --: |",
    ...f.pages.map(
      (p) =>
        `| ${p.name} | ${p.requests} | ${fmt(p.latency.p50)} | ${fmt(p.latency.mean)} | ${fmt(p.latency.p99)} |`,
    ),
    "",
    `CSV export (median of three in a row): ${f.exportRows.toLocaleString("en-US")} rows, ${fmt(f.exportBytes / 1024 / 1024, 1)} MiB in ${fmt(f.exportSeconds)} s; service RSS ${fmt(f.rssBeforeMiB, 1)} MiB before, peak ${fmt(f.exportPeakMiB, 1)} MiB during (${f.peakReset ? "peak reset before each export" : "lifetime peak: clear_refs was not permitted"}); growth of each: ${f.exportGrowthsMiB.map((g) => fmt(g, 1)).join(", ")} MiB.`,
    "",
    ...f.goals.map((g) => `- [${g.met ? "x" : " "}] ${g.text} — **${g.met ? "met" : "missed"}**`),
  ].join("\n");
}

await runAsScript(
  import.meta.url,
  log,
  async () => {
    process.stdout.write(`\n${renderDashboardTable(await benchDashboard())}\n`);
  },
  steps,
);
