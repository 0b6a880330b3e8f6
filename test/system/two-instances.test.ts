import { randomBytes } from "node:crypto";
import { type PublicClient, parseUnits } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Devnet, rpc, startDevnet } from "../../src/devnet/chain.ts";
import { type Database, openDatabase } from "../../src/platform/db/database.ts";
import { freshDatabaseUrl } from "../support/app.ts";
import { type DevnetClients, devnetClients } from "../support/devnet-clients.ts";
import { liveNetworkEnv } from "../support/devnet-env.ts";
import { blocksPass, untilDefined } from "../support/poll.ts";
import {
  callService,
  type Json,
  type ServiceProcess,
  startService,
  stopAllServices,
} from "../support/service-process.ts";

// Two service processes (ROLE=all, the default) on one PostgreSQL database and one devnet, as an
// operator runs them behind a load balancer (issue 20). Nothing may be paid twice and nothing
// answered as failed may be paid: 40 concurrent payouts from one workspace EOA alternate between
// the instances, each idempotency key is replayed on the other instance; then 20 payments settle
// while the worker leader is stopped (SIGSTOP) past its lease and continued (SIGCONT).
// Needs PostgreSQL (DATABASE_URL): the CI's PostgreSQL pass runs it.

const ADMIN = "two-instances-admin-secret-0123456789";
const MASTER_KEY = randomBytes(32).toString("hex");
const PAYOUTS = 40;
const PAYMENTS = 20;
const USDC = (amount: string) => parseUnits(amount, 6);

/** What the payout test looks for; each must stay empty. */
const FINDINGS = [
  "answered other than 200 from a funded wallet",
  "200 whose txHash did not pay its destination",
  "answered as failed, yet paid",
  "destination paid other than exactly once",
  "database disagrees with the chain",
  "GET /api/v1/payouts disagrees with the chain",
  "replay did not return the original txHash",
  "a nonce of the wallet not matched to exactly one record",
] as const;
type Finding = (typeof FINDINGS)[number];

const randomAddress = () => privateKeyToAccount(generatePrivateKey()).address;
/** The node's height, read afresh each time (viem's getBlockNumber caches it for seconds). */
const height = async () => BigInt(String(await rpc(devnet.rpcUrl, "eth_blockNumber", [])));

let devnet: Devnet;
let database: Database;
let dropDatabase: (() => Promise<void>) | undefined;
let a: ServiceProcess;
let b: ServiceProcess;
let chain: PublicClient;
let credit: DevnetClients["credit"];
let sendUsdc: DevnetClients["sendUsdc"];
let usdcBalance: DevnetClients["usdcBalance"];

async function createWorkspace(on: ServiceProcess, name: string) {
  const created = await callService(on, "POST", "/api/v1/workspaces", ADMIN, {
    name,
    settlementAddress: randomAddress(),
  });
  expect(created.status, JSON.stringify(created.json)).toBe(201);
  const workspace = created.json.workspace as { id: string; eoa: { address: string } };
  const liveKey = (created.json.apiKeys as { live: { key: string } }).live.key;
  return { id: workspace.id, eoa: workspace.eoa.address, liveKey };
}

/**
 * Every transaction the wallet has mined, against what the database recorded: each nonce used on
 * chain must be exactly one recorded transaction with that hash and a receipt (mined or failed),
 * and that record must belong to a payout or a settlement leg, or cancel one that does. The
 * mismatches, as text (none expected).
 */
async function unmatchedNonces(wallet: string): Promise<string[]> {
  const onChain = new Map<number, string>();
  const head = await chain.getBlockNumber();
  for (let n = 0n; n <= head; n++) {
    const block = await chain.getBlock({ blockNumber: n, includeTransactions: true });
    for (const tx of block.transactions) {
      if (tx.from.toLowerCase() === wallet.toLowerCase()) onChain.set(tx.nonce, tx.hash);
    }
  }
  const records = await database.db
    .selectFrom("chain_transactions")
    .select(["nonce", "tx_hash", "status", "purpose", "payout_id", "payment_id", "replaces_tx_hash"])
    .where("from_address", "=", wallet)
    .execute();
  const owners = new Map(records.map((r) => [r.tx_hash, r.payout_id ?? r.payment_id]));
  const mismatches: string[] = [];
  const used = await chain.getTransactionCount({ address: wallet as `0x${string}` });
  if (onChain.size !== used) mismatches.push(`${onChain.size} transactions found for ${used} nonces`);
  for (const [nonce, hash] of onChain) {
    const withReceipt = records.filter(
      (r) => Number(r.nonce) === nonce && (r.status === "mined" || r.status === "failed"),
    );
    const record = withReceipt[0];
    // A cancellation belongs to what the transaction it took the nonce of belonged to.
    const owner = record && owners.get(record.replaces_tx_hash ?? record.tx_hash);
    if (withReceipt.length !== 1 || record?.tx_hash !== hash || !owner) {
      mismatches.push(`nonce ${nonce}: ${hash} on chain; recorded ${JSON.stringify(withReceipt)}`);
    }
  }
  return mismatches;
}

const chainLease = () =>
  database.db
    .selectFrom("job_leases")
    .select(["holder", "expires_at"])
    .where("name", "=", "chain.live")
    .executeTakeFirst();

describe.skipIf(!process.env.DATABASE_URL)("two instances on one PostgreSQL and one devnet", () => {
  beforeAll(async () => {
    devnet = await startDevnet();
    const fresh = await freshDatabaseUrl();
    if (!fresh) throw new Error("DATABASE_URL is required");
    dropDatabase = fresh.drop;
    const env = {
      ...liveNetworkEnv(devnet),
      DATABASE_URL: fresh.url,
      MASTER_KEY,
      ADMIN_SECRET: ADMIN,
    };
    // A starts first and takes the chain job's lease; B starts once A holds it, so A is the leader.
    a = await startService(env);
    database = await openDatabase({ databaseUrl: fresh.url, poolSize: 4 });
    await untilDefined("A to lead the chain job", async () => (await chainLease()) ?? undefined, 30_000);
    b = await startService(env);
    ({ chain, credit, sendUsdc, usdcBalance } = devnetClients(devnet));
  }, 180_000);

  afterAll(async () => {
    await stopAllServices("SIGKILL");
    await database?.close();
    await dropDatabase?.();
    await devnet?.stop();
  });

  it("40 concurrent payouts from one wallet over both instances: every one paid exactly once, as answered, and replayed with its txHash", async () => {
    const workspace = await createWorkspace(a, "Two instances payouts");
    await credit(workspace.eoa, { USDC: String(PAYOUTS), ETH: "1" });
    await untilDefined(
      "the funding to be mined",
      async () => ((await usdcBalance(workspace.eoa)) === USDC(String(PAYOUTS)) ? true : undefined),
      10_000,
    );

    const destinations = Array.from({ length: PAYOUTS }, () => randomAddress());
    const body = (i: number) => ({
      tokenSymbol: "USDC",
      amount: "1",
      destinationAddress: destinations[i],
      idempotencyKey: `two-instances-${i}`,
    });
    const originals = destinations.map((_, i) =>
      callService(i % 2 ? b : a, "POST", "/api/v1/payouts", workspace.liveKey, body(i), 150_000),
    );
    // Each replay goes to the other instance as soon as its original is recorded (polled, not a
    // fixed wait): it finds the original still in progress or ended, and must answer as it did.
    const recorded = (i: number) =>
      untilDefined(
        `payout #${i} to be recorded`,
        async () =>
          database.db
            .selectFrom("payouts")
            .select("id")
            .where("workspace_id", "=", workspace.id)
            .where("idempotency_key", "=", `two-instances-${i}`)
            .executeTakeFirst(),
        120_000,
      );
    const replays = destinations.map((_, i) =>
      recorded(i).then(() =>
        callService(i % 2 ? a : b, "POST", "/api/v1/payouts", workspace.liveKey, body(i), 150_000),
      ),
    );
    const answers = await Promise.all(originals);
    const replayed = await Promise.all(replays);

    // Every payout finished in the database, then a few blocks for anything still on its way.
    await untilDefined(
      "no payout processing",
      async () => {
        const open = await database.db
          .selectFrom("payouts")
          .select("id")
          .where("workspace_id", "=", workspace.id)
          .where("status", "=", "processing")
          .execute();
        return open.length === 0 ? true : undefined;
      },
      120_000,
    );
    // A few blocks for a stray transaction to land if one were on its way: what is proved below
    // is that none was.
    await blocksPass(height, 3);

    const stored = await database.db
      .selectFrom("payouts")
      .select(["idempotency_key", "status", "tx_hash", "error"])
      .where("workspace_id", "=", workspace.id)
      .execute();
    const byKey = new Map(stored.map((row) => [row.idempotency_key, row]));
    const history = await callService(a, "GET", "/api/v1/payouts?limit=100", workspace.liveKey);
    const listed = new Set(
      ((history.json.payouts as Array<{ txHash: string }> | undefined) ?? []).map((p) => p.txHash),
    );

    const findings = {} as Record<Finding, string[]>;
    for (const kind of FINDINGS) findings[kind] = [];
    for (const [i, destination] of destinations.entries()) {
      const answer = answers[i] as { status: number; json: Json };
      const replay = replayed[i] as { status: number; json: Json };
      const paid = await usdcBalance(destination);
      const txHash = (answer.json.payout as { txHash?: string } | undefined)?.txHash;
      const row = byKey.get(`two-instances-${i}`);
      const label = `#${i} (${i % 2 ? "B" : "A"}): ${answer.status} ${JSON.stringify(answer.json).slice(0, 160)}`;
      if (answer.status !== 200) findings["answered other than 200 from a funded wallet"].push(label);
      if (paid !== 0n && paid !== USDC("1")) findings["destination paid other than exactly once"].push(label);
      if (answer.status === 200) {
        const receipt = txHash ? await chain.getTransactionReceipt({ hash: txHash as `0x${string}` }) : null;
        if (receipt?.status !== "success" || paid !== USDC("1"))
          findings["200 whose txHash did not pay its destination"].push(label);
      } else if (paid !== 0n && answer.status !== 202) {
        findings["answered as failed, yet paid"].push(label);
      }
      if ((row?.status === "completed") !== (paid === USDC("1")))
        findings["database disagrees with the chain"].push(
          `${label}; stored ${row?.status} ${row?.error ?? ""}`,
        );
      if (paid === USDC("1") && !(row?.tx_hash && listed.has(row.tx_hash)))
        findings["GET /api/v1/payouts disagrees with the chain"].push(label);
      const replayHash = (replay.json.payout as { txHash?: string } | undefined)?.txHash;
      if (answer.status === 200 && (replay.status !== 200 || replayHash !== txHash))
        findings["replay did not return the original txHash"].push(
          `${label}; replay ${replay.status} ${JSON.stringify(replay.json).slice(0, 160)}`,
        );
    }
    findings["a nonce of the wallet not matched to exactly one record"] = await unmatchedNonces(
      workspace.eoa,
    );
    const paidTotal = (await Promise.all(destinations.map((destination) => usdcBalance(destination)))).reduce(
      (sum, value) => sum + value,
      0n,
    );
    expect(await usdcBalance(workspace.eoa)).toBe(USDC(String(PAYOUTS)) - paidTotal);
    // Every kind of finding, and none found.
    expect(findings, `A: ${a.output().slice(-3000)}\nB: ${b.output().slice(-3000)}`).toEqual(
      Object.fromEntries(FINDINGS.map((kind) => [kind, []])),
    );
    expect(history.json.total).toBe(PAYOUTS);
  }, 300_000);

  it("20 settlements while the worker leader is stopped past its lease: each leg paid exactly once", async () => {
    const workspace = await createWorkspace(b, "Two instances settlements");
    const treasury = devnet.accounts.treasury.address;
    const treasuryBefore = await usdcBalance(treasury);
    // The wallet holds money of its own besides the payments (for payouts, say): a settlement
    // sent twice would be paid from it instead of reverting for want of funds.
    await credit(workspace.eoa, { USDC: "100" });
    const merchants = Array.from({ length: PAYMENTS }, () => randomAddress());
    const payments: Array<{ id: string; receivingAddress: string }> = [];
    for (const merchantWallet of merchants) {
      const created = await callService(b, "POST", "/api/v1/payments", workspace.liveKey, {
        tokenSymbol: "USDC",
        amount: "2",
        merchantWallet,
      });
      expect(created.status, JSON.stringify(created.json)).toBe(201);
      payments.push({
        id: (created.json.payment as { id: string }).id,
        receivingAddress: created.json.receivingAddress as string,
      });
    }
    // Blocks once a second only: every receipt the leader waits for (its gas top-up of the
    // receiving wallet first, which holds no ETH) takes up to a second.
    await rpc(devnet.rpcUrl, "evm_setAutomine", [false]);
    try {
      // Not waited for: with automine off, each payment would wait for the next block.
      for (const payment of payments) await sendUsdc(payment.receivingAddress, USDC("2"));
      const statuses = () =>
        database.db
          .selectFrom("payments")
          .select(["id", "status", "failure_reason"])
          .where("workspace_id", "=", workspace.id)
          .execute();
      // The leader is inside a settlement once it has recorded the receiving wallet's gas top-up:
      // it is waiting for that top-up's block, between "nothing recorded yet" and the legs.
      await untilDefined(
        "the leader to top the receiving wallet up",
        async () => {
          const topUp = await database.db
            .selectFrom("chain_transactions")
            .select("tx_hash")
            .where("purpose", "=", "gas_topup")
            .where("to_address", "=", workspace.eoa)
            .executeTakeFirst();
          return topUp ? true : undefined;
        },
        60_000,
      );
      const leader = await chainLease();
      a.child.kill("SIGSTOP");
      // B takes over once A's lease has run out, and settles meanwhile.
      await untilDefined(
        "B to take the chain job over",
        async () => {
          const lease = await chainLease();
          return lease && lease.holder !== leader?.holder ? true : undefined;
        },
        120_000,
      );
      await untilDefined(
        "B to finish the settlements",
        async () =>
          (await statuses()).every((p) => p.status === "forwarded" || p.status === "failed")
            ? true
            : undefined,
        120_000,
      );
      a.child.kill("SIGCONT");
      // Whatever A was doing when it stopped, it goes on with now; give it some blocks (the poll
      // below would pass at once, before A did anything wrong).
      await blocksPass(height, 5);
      await untilDefined(
        "no settlement transaction left open",
        async () => {
          const open = await database.db
            .selectFrom("chain_transactions")
            .select("tx_hash")
            .where("status", "=", "signed")
            .where("from_address", "=", workspace.eoa)
            .execute();
          return open.length === 0 ? true : undefined;
        },
        60_000,
      );
    } finally {
      await rpc(devnet.rpcUrl, "evm_setAutomine", [true]);
      a.child.kill("SIGCONT");
    }
    // Blocks for A to fall over in if it were going to.
    await blocksPass(height, 2);
    // A went on after its sessions were ended under it: it is still up, and serves.
    expect(a.child.exitCode, a.output().slice(-3000)).toBeNull();
    expect((await fetch(`${a.baseUrl}/health`)).status).toBe(200);

    const final = await database.db
      .selectFrom("payments")
      .select(["status", "failure_reason"])
      .where("workspace_id", "=", workspace.id)
      .execute();
    const legs = await database.db
      .selectFrom("chain_transactions")
      .select(["payment_id", "purpose", "status"])
      .where("from_address", "=", workspace.eoa)
      .where("status", "in", ["signed", "mined"])
      .execute();
    const received = await Promise.all(merchants.map((m) => usdcBalance(m)));
    expect(
      {
        statuses: final.map((p) => `${p.status}${p.failure_reason ? `: ${p.failure_reason}` : ""}`),
        merchantsPaidOtherThanOnce: received.filter((r) => r !== USDC("1.97")).map(String),
        treasuryReceived: (await usdcBalance(treasury)) - treasuryBefore,
        leftOnTheWallet: await usdcBalance(workspace.eoa),
        unmatchedNonces: await unmatchedNonces(workspace.eoa),
        legsReverted: (
          await database.db
            .selectFrom("chain_transactions")
            .select("tx_hash")
            .where("from_address", "=", workspace.eoa)
            .where("status", "=", "failed")
            .execute()
        ).length,
        legsPerPaymentAndPurpose: Math.max(
          ...Object.values(
            legs.reduce<Record<string, number>>((count, leg) => {
              const key = `${leg.payment_id}:${leg.purpose}`;
              count[key] = (count[key] ?? 0) + 1;
              return count;
            }, {}),
          ),
        ),
      },
      `A: ${a.output().slice(-3000)}\nB: ${b.output().slice(-3000)}`,
    ).toEqual({
      statuses: Array(PAYMENTS).fill("forwarded"),
      merchantsPaidOtherThanOnce: [],
      treasuryReceived: USDC("0.03") * BigInt(PAYMENTS),
      leftOnTheWallet: USDC("100"),
      unmatchedNonces: [],
      legsReverted: 0,
      legsPerPaymentAndPurpose: 1,
    });
  }, 400_000);
});
