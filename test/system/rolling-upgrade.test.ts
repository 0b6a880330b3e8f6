import { randomBytes } from "node:crypto";
import { sql } from "kysely";
import { parseUnits } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sandboxTxHash } from "../../src/chain/simulated/ledger.ts";
import { type Database, MIGRATIONS, openDatabase } from "../../src/platform/db/database.ts";
import { freshDatabaseUrl } from "../support/app.ts";
import { untilDefined } from "../support/poll.ts";
import { type ReleaseTree, releaseTree } from "../support/release-tree.ts";
import {
  callService,
  type Json,
  type ServiceProcess,
  startService,
  stopAllServices,
  stopService,
} from "../support/service-process.ts";

// A rolling upgrade (issue 39): the previous release's code and this tree's run on one PostgreSQL
// while sandbox payments, payouts and returns of inbox transfers flow through a client that
// retries a 5xx or a lost connection with the same idempotency key. The old release starts alone
// and migrates to its level; the new one starts beside it and runs the migrations added since;
// both serve for a while; the old one is stopped (SIGTERM) with requests in flight; the rest goes
// to the new one. Every operation must end as asked (after retries, possibly), and be done once.
// Needs PostgreSQL (DATABASE_URL): the CI's PostgreSQL pass runs it.

/**
 * The release upgraded from: the last release landed, the code instances still run while this
 * tree's migrations are applied (546e6a0: the last before issue 39's 037_inbox_checks and
 * 038_card_refund_source). Move it at each release, to the release just landed: the suite then
 * upgrades from it to whatever migrations are added after it.
 */
const PREVIOUS_RELEASE = "546e6a0";

const ADMIN = "rolling-upgrade-admin-secret-0123456789";
const MASTER_KEY = randomBytes(32).toString("hex");
/** Operations in all: payments, payouts and returns in turn. */
const OPERATIONS = 48;
const CONCURRENCY = 4;
const ATTEMPTS = 8;
const FAUCET = "100";
const USDC = (amount: string) => parseUnits(amount, 6);
const AMOUNT = { payment: "2.00", payout: "1.00", return: "1.50" } as const;
const EXPECTED_STATUS = { payment: 201, payout: 200, return: 201 } as const;

type Kind = keyof typeof AMOUNT;
interface Instance {
  name: "old" | "new";
  service: ServiceProcess;
}
interface Answer {
  status: number;
  json: Json;
}
interface Attempt {
  on: Instance["name"];
  /** The status answered, or the connection's error. */
  outcome: string;
  detail?: string;
}
interface Operation {
  kind: Kind;
  key: string;
  /** The payout's destination, or the return's inbox transfer. */
  target: string;
  attempts: Attempt[];
  /** The answer the client kept: the first that was not a 5xx; none if every attempt was. */
  final?: Answer & { on: Instance["name"] };
}

/** That share of the operations, as a count. */
const share = (fraction: number) => Math.round(OPERATIONS * fraction);
const randomAddress = () => `0x${randomBytes(20).toString("hex")}`;

let tree: ReleaseTree | undefined;
let database: Database;
let dropDatabase: (() => Promise<void>) | undefined;

beforeAll(() => {
  if (process.env.DATABASE_URL) tree = releaseTree(PREVIOUS_RELEASE);
});

afterAll(async () => {
  await stopAllServices("SIGKILL");
  await database?.close();
  await dropDatabase?.();
  tree?.remove();
});

/** What the balancer in front of the instances sends each request to: the routable ones in turn. */
let routable: Instance[] = [];
let turn = 0;
const pick = (): Instance => {
  const on = routable[turn++ % routable.length];
  if (!on) throw new Error("no instance to send to");
  return on;
};

/** The request an operation sends, the same on every attempt (its idempotency key included). */
function requestOf(op: Operation, sandboxKey: string): { path: string; headers: Json; body: Json } {
  const auth = { authorization: `Bearer ${sandboxKey}`, "content-type": "application/json" };
  if (op.kind === "payment")
    return {
      path: "/api/v1/payments",
      headers: { ...auth, "idempotency-key": op.key },
      body: { tokenSymbol: "USDC", amount: AMOUNT.payment, merchantWallet: op.target, description: op.key },
    };
  if (op.kind === "payout")
    return {
      path: "/api/v1/payouts",
      headers: auth,
      body: {
        tokenSymbol: "USDC",
        amount: AMOUNT.payout,
        destinationAddress: op.target,
        idempotencyKey: op.key,
      },
    };
  return {
    path: `/api/v1/transfers/unmatched/${op.target}/return`,
    headers: { ...auth, "idempotency-key": op.key },
    body: {},
  };
}

/** One attempt: the answer, or the connection's error as text. */
async function send(on: Instance, request: ReturnType<typeof requestOf>): Promise<Answer | string> {
  try {
    const res = await fetch(`${on.service.baseUrl}${request.path}`, {
      method: "POST",
      headers: request.headers as Record<string, string>,
      body: JSON.stringify(request.body),
      signal: AbortSignal.timeout(30_000),
    });
    const text = await res.text();
    let json: Json;
    try {
      json = JSON.parse(text) as Json;
    } catch {
      json = { unparsed: text };
    }
    return { status: res.status, json };
  } catch (err) {
    const e = err as Error & { cause?: { code?: string; message?: string } };
    return e.cause?.code ?? e.cause?.message ?? e.name;
  }
}

/** The client: each attempt to the balancer's next instance, again on a 5xx or a lost connection. */
async function perform(op: Operation, sandboxKey: string): Promise<void> {
  const request = requestOf(op, sandboxKey);
  for (let n = 0; n < ATTEMPTS; n++) {
    const on = pick();
    const answer = await send(on, request);
    if (typeof answer === "string") {
      op.attempts.push({ on: on.name, outcome: answer });
      continue;
    }
    op.attempts.push({
      on: on.name,
      outcome: String(answer.status),
      ...(answer.status >= 500 ? { detail: JSON.stringify(answer.json).slice(0, 200) } : {}),
    });
    if (answer.status < 500) {
      op.final = { ...answer, on: on.name };
      return;
    }
  }
}

/**
 * The load: CONCURRENCY clients take the operations in order, each starting one only while the
 * number started is under the allowance the test gives; the test raises it phase by phase.
 */
function startLoad(ops: Operation[], sandboxKey: string) {
  let started = 0;
  let done = 0;
  let allowance = 0;
  let wake: Array<() => void> = [];
  const client = async () => {
    while (started < ops.length) {
      if (started >= allowance) {
        await new Promise<void>((resolve) => wake.push(resolve));
        continue;
      }
      const op = ops[started++] as Operation;
      await perform(op, sandboxKey);
      done++;
    }
  };
  const clients = Promise.all(Array.from({ length: CONCURRENCY }, client));
  return {
    allow(n: number) {
      allowance = n;
      const waiting = wake;
      wake = [];
      for (const resolve of waiting) resolve();
    },
    /** Until `n` operations are done (a bounded poll). */
    doneWith: (n: number) =>
      untilDefined(`${n} operations done`, async () => (done >= n ? true : undefined), 60_000),
    finished: clients,
  };
}

const executedMigrations = async () =>
  (
    await sql<{ name: string }>`SELECT name FROM kysely_migration ORDER BY name`.execute(database.db)
  ).rows.map((r) => r.name);

/**
 * Through the old release: a workspace, its sandbox wallet funded, and the operations, in turn a
 * payment, a payout and the return of a payer's transfer (put in the inbox here, one each).
 */
async function setUp(old: Instance) {
  const created = await callService(old.service, "POST", "/api/v1/workspaces", ADMIN, {
    name: "Rolling upgrade",
    settlementAddress: randomAddress(),
  });
  expect(created.status, JSON.stringify(created.json)).toBe(201);
  const workspaceId = (created.json.workspace as { id: string }).id;
  const sandboxKey = (created.json.apiKeys as { test: { key: string } }).test.key;
  const funded = await callService(old.service, "POST", "/api/v1/sandbox/faucet", sandboxKey, {
    tokenSymbol: "USDC",
    amount: FAUCET,
  });
  expect(funded.status, JSON.stringify(funded.json)).toBe(200);
  const ops: Operation[] = [];
  for (let i = 0; i < OPERATIONS; i++) {
    const kind = (["payment", "payout", "return"] as const)[i % 3] as Kind;
    let target = randomAddress();
    if (kind === "return") {
      const transfer = await callService(
        old.service,
        "POST",
        "/api/v1/sandbox/incoming-transfer",
        sandboxKey,
        {
          tokenSymbol: "USDC",
          amount: AMOUNT.return,
          fromAddress: target,
        },
      );
      expect(transfer.status, JSON.stringify(transfer.json)).toBe(201);
      target = (transfer.json.transfer as { id: string }).id;
    }
    ops.push({ kind, key: `rolling-${kind}-${i}`, target, attempts: [] });
  }
  return { workspaceId, sandboxKey, ops };
}

/**
 * The upgrade, while the operations flow: the old release alone (each statement run, and
 * prepared, more than once); the new one started beside it (it runs the added migrations); both
 * behind the balancer; the old one stopped by SIGTERM with requests in flight, and dropped from
 * the balancer once it has exited; the rest through the new one.
 */
async function rollUpgrade(old: Instance, ops: Operation[], sandboxKey: string, env: Record<string, string>) {
  routable = [old];
  const load = startLoad(ops, sandboxKey);
  load.allow(share(0.2));
  await load.doneWith(share(0.2));
  load.allow(share(0.4));
  const next: Instance = { name: "new", service: await startService(env) };
  routable = [old, next];
  load.allow(share(0.7));
  await load.doneWith(share(0.6));
  const stopping = stopService(old.service.child, "SIGTERM");
  load.allow(share(0.85));
  await stopping;
  routable = [next];
  load.allow(OPERATIONS);
  await load.finished;
  return { next, oldExit: { code: old.service.child.exitCode, signal: old.service.child.signalCode } };
}

/** What the database holds for the workspace, against what each operation was answered. */
async function findingsOf(ops: Operation[], workspaceId: string) {
  const payments = await database.db
    .selectFrom("payments")
    .select(["id", "status", "description", "net_amount"])
    .where("workspace_id", "=", workspaceId)
    .execute();
  const transfers = await database.db
    .selectFrom("payouts")
    .select(["id", "kind", "status", "idempotency_key", "unmatched_transfer_id"])
    .where("workspace_id", "=", workspaceId)
    .execute();
  const inbox = await database.db
    .selectFrom("unmatched_transfers")
    .select(["id", "status", "from_address"])
    .where("workspace_id", "=", workspaceId)
    .execute();
  const credits = await database.db
    .selectFrom("ledger_entries")
    .select(["address", "tx_hash", "amount"])
    .where("amount", ">", "0")
    .execute();
  const creditsTo = (address: string | undefined) =>
    credits.filter((c) => c.address.toLowerCase() === address?.toLowerCase());
  const creditedOnce = (found: typeof credits, amount: string) =>
    found.length === 1 && BigInt(found[0]?.amount ?? 0) === USDC(amount);

  const findings: Record<string, string[]> = {
    "not answered as asked, after every retry": [],
    "answered as failed, yet done": [],
    "payment recorded other than once, not forwarded, or its settlement credited other than once": [],
    "payout recorded other than once, or not completed": [],
    "payout destination credited other than once": [],
    "return recorded other than once, or the transfer not returned": [],
    "payer credited back other than once": [],
  };
  const found = (kind: string, label: string, stored: unknown) =>
    findings[kind]?.push(`${label}; stored ${JSON.stringify(stored)}`);
  for (const op of ops) {
    const answer = `${op.final?.status} ${JSON.stringify(op.final?.json ?? {}).slice(0, 200)}`;
    const label = `${op.key}: ${JSON.stringify(op.attempts)} → ${answer}`;
    const succeeded = op.final?.status === EXPECTED_STATUS[op.kind];
    if (!succeeded) findings["not answered as asked, after every retry"]?.push(label);
    if (op.kind === "payment") {
      const rows = payments.filter((p) => p.description === op.key);
      const id = (op.final?.json.payment as { id?: string } | undefined)?.id;
      const settled = credits.filter((c) => c.tx_hash === sandboxTxHash(`payment:${id}`));
      if (!succeeded && rows.length > 0) found("answered as failed, yet done", label, rows);
      if (
        succeeded &&
        (rows.length !== 1 || rows[0]?.id !== id || rows[0]?.status !== "forwarded" || settled.length !== 1)
      )
        found(
          "payment recorded other than once, not forwarded, or its settlement credited other than once",
          label,
          { rows, settled },
        );
    } else if (op.kind === "payout") {
      const rows = transfers.filter((t) => t.idempotency_key === op.key);
      const paid = creditsTo(op.target);
      if (!succeeded && paid.length > 0) found("answered as failed, yet done", label, paid);
      if (succeeded && (rows.length !== 1 || rows[0]?.status !== "completed"))
        found("payout recorded other than once, or not completed", label, rows);
      if (succeeded && !creditedOnce(paid, AMOUNT.payout))
        found("payout destination credited other than once", label, paid);
    } else {
      const rows = transfers.filter((t) => t.unmatched_transfer_id === op.target);
      const transfer = inbox.find((t) => t.id === op.target);
      const paid = creditsTo(transfer?.from_address);
      if (!succeeded && paid.length > 0) found("answered as failed, yet done", label, paid);
      if (
        succeeded &&
        (rows.length !== 1 || rows[0]?.status !== "completed" || transfer?.status !== "returned")
      )
        found("return recorded other than once, or the transfer not returned", label, { rows, transfer });
      if (succeeded && !creditedOnce(paid, AMOUNT.return))
        found("payer credited back other than once", label, paid);
    }
  }
  const net = payments.reduce((sum, p) => sum + BigInt(p.net_amount), 0n);
  return {
    findings,
    payments: payments.length,
    returns: transfers.filter((t) => t.kind === "return").length,
    net,
  };
}

/** The report in the test's output: the migrations, the retries, every instance's answers. */
function report(
  ops: Operation[],
  levels: { old: string[]; added: string[] },
  old: Instance,
  seconds: number,
) {
  const attempts = ops.flatMap((op) => op.attempts);
  const outcomes: Record<string, number> = {};
  for (const a of attempts) {
    const key = `${a.on} ${a.outcome}${a.detail ? ` ${a.detail}` : ""}`;
    outcomes[key] = (outcomes[key] ?? 0) + 1;
  }
  // A stale prepared statement inside a transaction fails its request (a 500, logged); outside one,
  // the service's client prepares it again and runs it once more without a log line
  // (preparing-client.ts): only PostgreSQL's own log shows those.
  const stalePlans = (old.service.output().match(/cached plan must not change result type/g) ?? []).length;
  console.log(
    [
      `rolling upgrade from ${PREVIOUS_RELEASE} (at ${levels.old.at(-1)}) to this tree ` +
        `(+ ${levels.added.join(", ") || "no migration"}): ${ops.length} operations in ${seconds.toFixed(1)} s`,
      `retries: ${attempts.length - ops.length} (operations retried: ${ops.filter((op) => op.attempts.length > 1).length}); ` +
        `"cached plan must not change result type" in the old release's log: ${stalePlans}`,
      "attempts by instance and outcome:",
      ...Object.entries(outcomes).map(([key, n]) => `  ${n} × ${key}`),
    ].join("\n"),
  );
}

describe.skipIf(!process.env.DATABASE_URL)("a rolling upgrade from the previous release", () => {
  it("payments, payouts and returns through the old release, both, then the new one: each done once, none failed", async () => {
    const fresh = await freshDatabaseUrl();
    if (!fresh || !tree) throw new Error("DATABASE_URL is required");
    dropDatabase = fresh.drop;
    database = await openDatabase({ databaseUrl: fresh.url, poolSize: 2 });
    const env = { DATABASE_URL: fresh.url, MASTER_KEY, ADMIN_SECRET: ADMIN, RATE_LIMIT_SANDBOX: "100000" };

    // The old release alone migrates to its level, which must be a prefix of this tree's.
    const old: Instance = { name: "old", service: await startService(env, { sourceDir: tree.dir }) };
    const oldLevel = await executedMigrations();
    const newLevel = Object.keys(MIGRATIONS).sort();
    expect(newLevel.slice(0, oldLevel.length), "the previous release's migrations").toEqual(oldLevel);
    const { workspaceId, sandboxKey, ops } = await setUp(old);

    const began = Date.now();
    const { next, oldExit } = await rollUpgrade(old, ops, sandboxKey, env);
    const seconds = (Date.now() - began) / 1000;
    report(ops, { old: oldLevel, added: newLevel.slice(oldLevel.length) }, old, seconds);

    const stored = await findingsOf(ops, workspaceId);
    const logs = `old: ${old.service.output().slice(-4000)}\nnew: ${next.service.output().slice(-4000)}`;
    expect(stored.findings, logs).toEqual(
      Object.fromEntries(Object.keys(stored.findings).map((kind) => [kind, []])),
    );
    // The new instance's API agrees: each payout and payment listed once, and the wallet holds
    // the faucet's money and the payments' net, less the payouts (each return gave back a transfer).
    const count = (kind: Kind) => ops.filter((op) => op.kind === kind).length;
    const payouts = await callService(next.service, "GET", "/api/v1/payouts?limit=100", sandboxKey);
    const payments = await callService(next.service, "GET", "/api/v1/payments?limit=100", sandboxKey);
    const balance = await callService(next.service, "GET", "/api/v1/wallet/balance", sandboxKey);
    const usdc = (balance.json.eoa as { balances?: Record<string, string> } | undefined)?.balances?.USDC;
    expect(
      {
        oldExit,
        migrations: await executedMigrations(),
        payments: stored.payments,
        returns: stored.returns,
        payoutsListed: payouts.json.total,
        paymentsListed: payments.json.total,
        balance: usdc === undefined ? undefined : parseUnits(usdc, 6),
        // Both instances answered operations: the upgrade overlapped the load.
        answeredBy: [...new Set(ops.map((op) => op.final?.on))].sort(),
      },
      logs,
    ).toEqual({
      oldExit: { code: 0, signal: null },
      migrations: newLevel,
      payments: count("payment"),
      returns: count("return"),
      payoutsListed: count("payout"),
      paymentsListed: count("payment"),
      balance: USDC(FAUCET) + stored.net - USDC(AMOUNT.payout) * BigInt(count("payout")),
      answeredBy: ["new", "old"],
    });
  }, 120_000);
});
