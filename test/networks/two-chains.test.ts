import { parseEnv } from "node:util";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.ts";
import { type Devnet, mine, revert, rpc, snapshot, startDevnet } from "../../src/devnet/chain.ts";
import { envFileText } from "../../src/devnet/env-file.ts";
import { createWorkers, type Workers } from "../../src/workers.ts";
import {
  bearer,
  type CreatedWorkspace,
  createWorkspace,
  startTestApp,
  type TestApp,
} from "../support/app.ts";
import { type DevnetClients, devnetClients } from "../support/devnet-clients.ts";
import { liveNetworksEnv } from "../support/devnet-env.ts";
import { until } from "../support/poll.ts";
import { startRpcProxy } from "../support/rpc-proxy.ts";

// One live environment on two chains at once (D22): two devnets with their own chain ids, each a
// network of live (`devnet-a` the default, `devnet-b`), each with its own watcher, settlement and
// sender. A payment, a payout and a balance name their network and move money on that chain
// only; a transfer on the other chain never pays it; a chain whose node is down stops none of the
// other's work, and /ready names it. The service reaches chain A through a proxy that can cut it
// off (the node unreachable, as a crashed or partitioned node looks to the service) while the
// chain itself goes on, so its backlog is there to detect once it answers again.

const randomAddress = () => privateKeyToAccount(generatePrivateKey()).address;
const FEE_BPS = 150n;

describe("live on two chains at once", () => {
  let a: Devnet;
  let b: Devnet;
  let onA: DevnetClients;
  let onB: DevnetClients;
  let t: TestApp;
  let workers: Workers;
  let ws: CreatedWorkspace;
  let env: Record<string, string>;
  let proxyA: Awaited<ReturnType<typeof startRpcProxy>>;
  /** Chain A's node cut off from the service. */
  let aDown = false;

  beforeAll(async () => {
    // B has the ERC-4337 contracts and a bundler of its own (a smart wallet paid on B).
    [a, b] = await Promise.all([startDevnet(), startDevnet({ chainId: 31_338, accountAbstraction: true })]);
    const aaB = b.aa;
    if (!aaB) throw new Error("devnet B started without its ERC-4337 stack");
    onA = devnetClients(a);
    onB = devnetClients(b);
    proxyA = await startRpcProxy(a.rpcUrl, async () => (aDown ? "drop" : undefined));
    env = liveNetworksEnv(
      [
        ["devnet-a", { ...a, rpcUrl: proxyA.url }],
        ["devnet-b", b],
      ],
      {
        LIVE_DEVNET_B_BUNDLER_URL: aaB.bundlerUrl,
        LIVE_DEVNET_B_PAYMASTER_URL: aaB.paymasterUrl,
        LIVE_DEVNET_B_ENTRYPOINT_ADDRESS: aaB.entryPoint,
        LIVE_DEVNET_B_ACCOUNT_FACTORY_ADDRESS: aaB.accountFactory,
        LIVE_DEVNET_B_BUNDLER_INSTANT_BUNDLING: "true",
      },
    );
    t = await startTestApp(env);
    workers = createWorkers(t.app, { dispatcher: { pollIntervalMs: 50 } });
    workers.start();
    ws = await createWorkspace(t);
  }, 120_000);

  afterAll(async () => {
    await workers?.stop();
    await t?.close();
    await proxyA?.close();
    await Promise.all([a?.stop(), b?.stop()]);
  });

  const api = async (method: "GET" | "POST", url: string, payload?: Record<string, unknown>) => {
    const res = await t.request({
      method,
      url,
      headers: bearer(ws.liveKey),
      ...(payload ? { payload } : {}),
    });
    return { status: res.statusCode, body: res.json() };
  };

  const createPayment = async (body: Record<string, unknown>) => {
    const res = await api("POST", "/api/v1/payments", { tokenSymbol: "USDC", ...body });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    return res.body as { payment: { id: string; network: string | null }; receivingAddress: string };
  };

  const statusOf = async (id: string) => (await api("GET", `/api/v1/payments/${id}`)).body.payment;

  it("configures both chains, with B's bundler, from the env file `npm run devnet` writes", () => {
    const config = loadConfig(parseEnv(envFileText(a, [b])));
    expect(
      config.networks.live.map(({ id, name, chainId, rpcUrl, tokens }) => ({
        id,
        name,
        chainId,
        rpcUrl,
        usdc: tokens.USDC,
      })),
    ).toEqual([
      {
        id: "default",
        name: `Chain ${a.chainId}`,
        chainId: a.chainId,
        rpcUrl: a.rpcUrl,
        usdc: a.tokens.USDC,
      },
      { id: "devnet-b", name: "Devnet B", chainId: 31_338, rpcUrl: b.rpcUrl, usdc: b.tokens.USDC },
    ]);
    expect(config.networks.live[1]?.accountAbstraction).toMatchObject({
      bundlerUrl: b.aa?.bundlerUrl,
      paymaster: { kind: "service", url: b.aa?.paymasterUrl },
      instantBundling: true,
    });
    // The default network of a devnet file pays through its paymaster service too.
    expect(loadConfig(parseEnv(envFileText(b))).networks.live[0]?.accountAbstraction?.paymaster).toEqual({
      kind: "service",
      url: b.aa?.paymasterUrl,
      context: undefined,
    });
  });

  it("lists both networks, the first the default", async () => {
    const res = await api("GET", "/api/v1/networks");
    expect(res.status).toBe(200);
    expect(res.body.default).toBe("devnet-a");
    expect(
      res.body.networks.map((n: { id: string; caip2: string; default: boolean }) => [
        n.id,
        n.caip2,
        n.default,
      ]),
    ).toEqual([
      ["devnet-a", `eip155:${a.chainId}`, true],
      ["devnet-b", "eip155:31338", false],
    ]);
  });

  it("settles a payment on devnet-b on chain B: net to the merchant and fee to the treasury there, nothing on A", async () => {
    const merchant = randomAddress();
    const treasuryBefore = await onB.usdcBalance(b.accounts.treasury.address);
    const created = await createPayment({ amount: "100", merchantWallet: merchant, network: "devnet-b" });
    expect(created.payment.network).toBe("devnet-b");
    // The workspace EOA has one address on every EVM chain.
    expect(created.receivingAddress).toBe(ws.eoaAddress);

    await onB.sendUsdc(created.receivingAddress, 100_000_000n);
    const paid = await until(
      "the devnet-b payment forwarded",
      () => statusOf(created.payment.id),
      (payment) => payment.status === "forwarded",
      45_000,
    );
    expect(paid.network).toBe("devnet-b");
    const fee = (100_000_000n * FEE_BPS) / 10_000n;
    expect(await onB.usdcBalance(merchant)).toBe(100_000_000n - fee);
    expect((await onB.usdcBalance(b.accounts.treasury.address)) - treasuryBefore).toBe(fee);
    expect(await onA.usdcBalance(merchant)).toBe(0n);
  }, 60_000);

  it("settles smart-wallet and EOA payments on devnet-b with their splits, and refunds on B: exact balances there, none on A", async () => {
    const other = await createWorkspace(t);
    const call = async (method: "POST" | "PUT", url: string, payload: Record<string, unknown> = {}) => {
      const res = await t.request({ method, url, headers: bearer(other.liveKey), payload });
      expect(res.statusCode, res.body).toBeLessThan(300);
      return res.json();
    };
    const partner = randomAddress();
    await call("PUT", "/api/v1/splits", {
      enabled: true,
      splits: [{ label: "Partner", percentBps: 2000, destination: partner }],
    });
    const smart = (await call("POST", `/api/v1/workspaces/${other.id}/smart-wallet`)).smartWallet.address;
    const merchant = randomAddress();
    const treasuryBefore = await onB.usdcBalance(b.accounts.treasury.address);
    const created = await call("POST", "/api/v1/payments", {
      tokenSymbol: "USDC",
      amount: "10",
      merchantWallet: merchant,
      network: "devnet-b",
      walletType: "smart_wallet",
    });
    expect(created.receivingAddress).toBe(smart);
    await onB.sendUsdc(smart, 10_000_000n);
    const paid = await until(
      "the smart-wallet payment forwarded on B",
      async () =>
        (
          await t.request({
            method: "GET",
            url: `/api/v1/payments/${created.payment.id}`,
            headers: bearer(other.liveKey),
          })
        ).json().payment,
      (payment: { status: string; network: string }) => payment.status === "forwarded",
      45_000,
    );
    expect(paid.network).toBe("devnet-b");
    // 10 USDC: fee 0.15, net 9.85; the partner's 20% of the net is 1.97, the merchant's 7.88.
    expect(await onB.usdcBalance(merchant)).toBe(7_880_000n);
    expect(await onB.usdcBalance(partner)).toBe(1_970_000n);
    expect((await onB.usdcBalance(b.accounts.treasury.address)) - treasuryBefore).toBe(150_000n);
    expect(await onB.usdcBalance(smart)).toBe(0n);
    expect([await onA.usdcBalance(merchant), await onA.usdcBalance(partner)]).toEqual([0n, 0n]);
    // The account was deployed on B by its first operation; A never saw it.
    expect(((await onB.chain.getCode({ address: smart })) ?? "0x").length).toBeGreaterThan(2);
    expect(await onA.chain.getCode({ address: smart })).toBeUndefined();

    // The same on the workspace EOA, by transactions on B; then a refund of it, on B.
    const byEoa = await call("POST", "/api/v1/payments", {
      tokenSymbol: "USDC",
      amount: "20",
      merchantWallet: merchant,
      network: "devnet-b",
      walletType: "eoa",
    });
    await onB.sendUsdc(other.eoaAddress, 20_000_000n);
    await until(
      "the EOA payment forwarded on B",
      async () =>
        (
          await t.request({
            method: "GET",
            url: `/api/v1/payments/${byEoa.payment.id}`,
            headers: bearer(other.liveKey),
          })
        ).json().payment,
      (payment: { status: string }) => payment.status === "forwarded",
      45_000,
    );
    // 20 USDC: fee 0.30, net 19.70; the partner's 3.94, the merchant's 15.76 (beside 7.88 before).
    expect(await onB.usdcBalance(merchant)).toBe(7_880_000n + 15_760_000n);
    expect(await onB.usdcBalance(partner)).toBe(1_970_000n + 3_940_000n);
    expect([await onA.usdcBalance(merchant), await onA.usdcBalance(partner)]).toEqual([0n, 0n]);
    await onB.credit(other.eoaAddress, { USDC: "5", ETH: "1" });
    const payer = b.accounts.payer.address;
    const before = await onB.usdcBalance(payer);
    const refund = await call("POST", `/api/v1/payments/${byEoa.payment.id}/refunds`, {
      amount: "2",
      destinationAddress: payer,
    });
    expect(refund.refund).toMatchObject({ network: "devnet-b", status: "completed", amount: "2.00" });
    expect((await onB.usdcBalance(payer)) - before).toBe(2_000_000n);
    expect(await onB.usdcBalance(other.eoaAddress)).toBe(3_000_000n);
  }, 90_000);

  it("does not let a transfer on chain A pay a payment on devnet-b: it lands in devnet-a's inbox", async () => {
    const created = await createPayment({ amount: "7", network: "devnet-b" });
    await onA.sendUsdc(ws.eoaAddress, 7_000_000n);
    const inbox = await until(
      "the chain A transfer in the inbox",
      async () => (await api("GET", "/api/v1/transfers/unmatched")).body.transfers ?? [],
      (transfers: Array<{ amount: string }>) => transfers.some((one) => one.amount === "7.00"),
    );
    expect(inbox.find((one: { amount: string }) => one.amount === "7.00")).toMatchObject({
      network: "devnet-a",
      token: "USDC",
      status: "open",
      paymentId: null,
    });
    expect((await statusOf(created.payment.id)).status).toBe("pending");

    await onB.sendUsdc(ws.eoaAddress, 7_000_000n);
    const paid = await until(
      "the devnet-b payment paid on chain B",
      () => statusOf(created.payment.id),
      (payment) => payment.status === "forwarded",
    );
    expect(paid.network).toBe("devnet-b");
  }, 60_000);

  it("pays out on the network named, from that chain; Insufficient balance names the network", async () => {
    await onB.credit(ws.eoaAddress, { USDC: "20", ETH: "1" });
    const destination = randomAddress();
    const res = await api("POST", "/api/v1/payouts", {
      tokenSymbol: "USDC",
      amount: "5",
      destinationAddress: destination,
      network: "devnet-b",
    });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.payout).toMatchObject({ network: "devnet-b", status: "completed", amount: "5.00" });
    expect(await onB.usdcBalance(destination)).toBe(5_000_000n);
    expect(await onA.usdcBalance(destination)).toBe(0n);

    const short = await api("POST", "/api/v1/payouts", {
      tokenSymbol: "USDC",
      amount: "1000",
      destinationAddress: destination,
    });
    expect(short.status).toBe(400);
    expect(short.body).toMatchObject({
      error: "Insufficient balance",
      network: "devnet-a",
      tokenSymbol: "USDC",
    });
    const unknown = await api("POST", "/api/v1/payouts", {
      tokenSymbol: "USDC",
      amount: "1",
      destinationAddress: destination,
      network: "devnet-c",
    });
    expect(unknown).toEqual({ status: 400, body: { error: "Unknown network", network: "devnet-c" } });
  }, 60_000);

  it("shows the default network's balances, and each network's under networks", async () => {
    const res = await api("GET", "/api/v1/wallet/balance");
    expect(res.status).toBe(200);
    expect(Object.keys(res.body.networks)).toEqual(["devnet-a", "devnet-b"]);
    expect({ eoa: res.body.eoa, smartWallet: res.body.smartWallet }).toEqual(res.body.networks["devnet-a"]);
    const usdcOn = async (clients: DevnetClients) => Number(await clients.usdcBalance(ws.eoaAddress)) / 1e6;
    expect(Number(res.body.networks["devnet-a"].eoa.balances.USDC)).toBe(await usdcOn(onA));
    expect(Number(res.body.networks["devnet-b"].eoa.balances.USDC)).toBe(await usdcOn(onB));
    expect(res.body.networks["devnet-a"].eoa.balances.USDC).not.toBe(
      res.body.networks["devnet-b"].eoa.balances.USDC,
    );
  });

  it("reads an agent's wallet on each network: balances the default's, networks each one's", async () => {
    const call = async (method: "GET" | "POST", url: string, payload?: Record<string, unknown>) =>
      (await t.request({ method, url, headers: bearer(ws.liveKey), ...(payload ? { payload } : {}) })).json();
    const agent = (await call("POST", "/api/agents/create", { name: "Buyer" })).data;
    const wallet = (
      await call("POST", "/api/wallets/create", {
        ownerId: agent.agentId,
        type: "agent",
        currencies: ["USDC"],
      })
    ).data;
    await onB.fund(wallet.address, { USDC: "4" });
    const read = (await call("GET", `/api/wallets/${wallet.walletId}`)).data;
    expect(read.balances).toEqual({ USDC: "0.00" });
    expect(read.networks).toEqual({ "devnet-a": { USDC: "0.00" }, "devnet-b": { USDC: "4.00" } });
    const onNetwork = (await call("GET", `/api/wallets/${wallet.walletId}/balance/USDC?network=devnet-b`))
      .data;
    expect(onNetwork).toMatchObject({ network: "devnet-b", balance: "4.00" });
  });

  it("with a second instance on the database: each network's jobs led once, every payment settled once", async () => {
    const second = await startTestApp(env, { database: t.database });
    const secondWorkers = createWorkers(second.app, { dispatcher: { pollIntervalMs: 50 } });
    secondWorkers.start();
    try {
      const merchants = Array.from({ length: 6 }, () => randomAddress());
      const created = await Promise.all(
        merchants.map((merchantWallet, i) =>
          createPayment({
            amount: `${11 + i}`,
            merchantWallet,
            network: i % 2 === 0 ? "devnet-a" : "devnet-b",
          }),
        ),
      );
      for (const [i, payment] of created.entries()) {
        await (i % 2 === 0 ? onA : onB).sendUsdc(payment.receivingAddress, BigInt(11 + i) * 1_000_000n);
      }
      for (const payment of created) {
        await until(
          `payment ${payment.payment.id} forwarded`,
          () => statusOf(payment.payment.id),
          (found) => found.status === "forwarded",
        );
      }
      for (const [i, merchant] of merchants.entries()) {
        const gross = BigInt(11 + i) * 1_000_000n;
        const [paidOn, other] = i % 2 === 0 ? [onA, onB] : [onB, onA];
        expect(await paidOn.usdcBalance(merchant)).toBe(gross - (gross * FEE_BPS) / 10_000n);
        expect(await other.usdcBalance(merchant)).toBe(0n);
      }
      const leases = await t.database.db
        .selectFrom("job_leases")
        .select(["name"])
        .where("name", "like", "chain.live%")
        .orderBy("name")
        .execute();
      expect(leases.map((lease) => lease.name)).toEqual(["chain.live", "chain.live.devnet-b"]);
    } finally {
      await secondWorkers.stop();
      await second.close(true);
    }
  }, 90_000);

  it("handles a reorganisation of chain B on B alone: its detection goes back to pending, A's payment completes", async () => {
    // Chain B mines only on transactions meanwhile, so its payment stays detected (one block of
    // the two it needs) until the reorganisation removes it.
    await rpc(b.rpcUrl, "evm_setIntervalMining", [0]);
    try {
      const onBPayment = await createPayment({ amount: "9", network: "devnet-b" });
      const onAPayment = await createPayment({ amount: "9", merchantWallet: randomAddress() });
      const before = await snapshot(b);
      await onB.sendUsdc(ws.eoaAddress, 9_000_000n);
      await until(
        "the devnet-b payment detected",
        () => statusOf(onBPayment.payment.id),
        (payment) => payment.status === "detected",
      );
      await revert(b, before);
      await mine(b, 3);
      await onA.sendUsdc(ws.eoaAddress, 9_000_000n);
      const back = await until(
        "the devnet-b payment back to pending",
        () => statusOf(onBPayment.payment.id),
        (payment) => payment.status === "pending",
      );
      expect(back.txHash).toBeNull();
      const paidOnA = await until(
        "the devnet-a payment forwarded",
        () => statusOf(onAPayment.payment.id),
        (payment) => payment.status === "forwarded",
      );
      expect(paidOnA.network).toBe("devnet-a");
    } finally {
      await rpc(b.rpcUrl, "evm_setIntervalMining", [1000]);
    }
  }, 60_000);

  it("a payment payable on both networks: the payer's choice on the page, paid on A, a later transfer on B returned on B", async () => {
    const created = await createPayment({ amount: "6", networks: ["devnet-a", "devnet-b"] });
    expect(created.payment).toMatchObject({ network: null, networks: ["devnet-a", "devnet-b"] });
    expect((created as { receivingAddresses?: unknown }).receivingAddresses).toEqual({
      "devnet-a": ws.eoaAddress,
      "devnet-b": ws.eoaAddress,
    });
    // The hosted page offers both; the payer's choice shows that chain.
    const page = async (query: string) =>
      (await t.request({ method: "GET", url: `/pay/${created.payment.id}${query}` })).body;
    const first = await page("");
    expect(first).toContain('id="networks"');
    expect(first).toContain(`(chain id ${a.chainId})`);
    const chosen = await page("?network=devnet-b");
    expect(chosen).toMatch(/id="network">[^<]+<\/strong> \(chain id 31338\)/);
    expect(chosen).toMatch(/href="\/pay\/[^"]+\?network=devnet-b" aria-current="true"/);

    const merchantBefore = await onA.usdcBalance(a.accounts.treasury.address);
    await onA.sendUsdc(ws.eoaAddress, 6_000_000n);
    const paid = await until(
      "the payment paid on chain A",
      () => statusOf(created.payment.id),
      (payment) => payment.status === "forwarded",
    );
    expect(paid.network).toBe("devnet-a");
    expect((await onA.usdcBalance(a.accounts.treasury.address)) - merchantBefore).toBe(
      (6_000_000n * FEE_BPS) / 10_000n,
    );
    // Paid already: the same again on chain B is not lost, it is B's inbox item, returned on B.
    const page2 = await page("");
    expect(page2).not.toContain('id="networks"');
    await onB.credit(ws.eoaAddress, { ETH: "1" });
    const payerOnB = b.accounts.payer.address;
    await onB.sendUsdc(ws.eoaAddress, 6_000_000n);
    const inbox = await until(
      "the chain B transfer in devnet-b's inbox",
      async () => (await api("GET", "/api/v1/transfers/unmatched?limit=100")).body.transfers ?? [],
      (transfers: Array<{ id: string; amount: string; network: string; status: string }>) =>
        transfers.some((one) => one.amount === "6.00" && one.network === "devnet-b" && one.status === "open"),
    );
    const item = inbox.find(
      (one) => one.amount === "6.00" && one.network === "devnet-b" && one.status === "open",
    );
    if (!item) throw new Error("no devnet-b inbox item");
    expect(item).toMatchObject({ status: "open", paymentId: null, from: payerOnB });
    const before = await onB.usdcBalance(payerOnB);
    const returned = await until(
      "the return accepted once chain B confirms the transfer",
      () => api("POST", `/api/v1/transfers/unmatched/${item.id}/return`, {}),
      (res) => res.status === 201,
    );
    expect(returned.body.refund).toMatchObject({ network: "devnet-b", status: "completed" });
    expect((await onB.usdcBalance(payerOnB)) - before).toBe(6_000_000n);
    expect((await statusOf(created.payment.id)).status).toBe("forwarded");
  }, 90_000);

  it("keeps devnet-b's payments moving while chain A's node is cut off; /ready names it; A's backlog is detected once it answers", async () => {
    const waitingOnA = await createPayment({ amount: "2.5", network: "devnet-a" });
    aDown = true;
    // Paid on chain A while the service cannot see it.
    await onA.sendUsdc(ws.eoaAddress, 2_500_000n);
    const merchant = randomAddress();
    const created = await createPayment({ amount: "3", merchantWallet: merchant, network: "devnet-b" });
    await onB.sendUsdc(ws.eoaAddress, 3_000_000n);
    await until(
      "the devnet-b payment forwarded with chain A down",
      () => statusOf(created.payment.id),
      (payment) => payment.status === "forwarded",
    );
    expect(await onB.usdcBalance(merchant)).toBe(3_000_000n - (3_000_000n * FEE_BPS) / 10_000n);
    // Nothing of chain A is seen, and nothing of it fails, while its node is cut off.
    expect((await statusOf(waitingOnA.payment.id)).status).toBe("pending");

    const ready = await t.request({ method: "GET", url: "/ready" });
    expect(ready.statusCode).toBe(503);
    const { checks } = ready.json();
    expect(checks.database).toBe("ok");
    expect(checks["live.devnet-b.rpc"]).toBe("ok");
    expect(checks["live.rpc"]).toMatch(/^not answering/);

    // Its node's last answer is trusted for a few seconds (chain/network-health.ts), then a payment
    // or payout on it is refused, naming it; nothing is recorded for the payout.
    const refused = await until(
      "a payment on devnet-a refused",
      () => api("POST", "/api/v1/payments", { tokenSymbol: "USDC", amount: "1" }),
      (res) => res.status === 503,
      20_000,
      250,
    );
    expect(refused.body).toEqual({ error: "Network unavailable", network: "devnet-a" });
    const payout = await api("POST", "/api/v1/payouts", {
      tokenSymbol: "USDC",
      amount: "1",
      destinationAddress: merchant,
      network: "devnet-a",
    });
    expect(payout).toEqual({ status: 503, body: { error: "Network unavailable", network: "devnet-a" } });
    const stillB = await api("POST", "/api/v1/payments", {
      tokenSymbol: "USDC",
      amount: "1",
      network: "devnet-b",
    });
    expect(stillB.status).toBe(201);

    // Back: the watcher of A scans what it missed, and the payment made meanwhile completes.
    aDown = false;
    const caughtUp = await until(
      "chain A's backlog detected",
      () => statusOf(waitingOnA.payment.id),
      (payment) => payment.status === "forwarded",
      45_000,
    );
    expect(caughtUp.network).toBe("devnet-a");
    const readyAgain = await until(
      "/ready with both networks answering",
      async () => (await t.request({ method: "GET", url: "/ready" })).statusCode,
      (status) => status === 200,
      20_000,
    );
    expect(readyAgain).toBe(200);
  }, 120_000);
});
