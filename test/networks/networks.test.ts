import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.ts";
import { InvalidRequest } from "../../src/domain/errors.ts";
import { NetworkDirectory, UnknownNetwork } from "../../src/modules/networks/directory.ts";
import { due } from "../../src/modules/payments/settlement/settlement-repo.ts";
import { bearer, createWorkspace, startTestApp, type TestApp } from "../support/app.ts";
import { pendingPayment } from "../support/refund-pages.ts";

// The networks of each environment (D22): GET /api/v1/networks and the directory a request's
// `network` is checked against: the chains the <ENV>_… variables name (id `default` for the old
// ones), or the sandbox's simulated networks sandbox-a (its default) and sandbox-b.

const USDC = "0x1000000000000000000000000000000000000001";
const ADAO = "0x1000000000000000000000000000000000000002";
const DAI = "0x1000000000000000000000000000000000000003";

/** A live chain by the old variables; no node is reached (nothing here starts the workers). */
const LIVE = {
  LIVE_RPC_URL: "http://127.0.0.1:9/",
  LIVE_CHAIN_ID: "8453",
  LIVE_USDC_ADDRESS: USDC,
  LIVE_ADAO_ADDRESS: ADAO,
  LIVE_TREASURY_ADDRESS: "0x2000000000000000000000000000000000000002",
  LIVE_CONFIRMATIONS: "3",
};

const SANDBOX_A = {
  id: "sandbox-a",
  caip2: "eip155:73570001",
  name: "Sandbox A",
  chainId: 73_570_001,
  simulated: true,
  default: true,
  tokens: [
    { symbol: "ETH", address: null, decimals: 18 },
    { symbol: "USDC", address: "0xE948B10A290BF5Ee274cF0B50d1387fb7049B9f3", decimals: 6 },
    { symbol: "ADAO", address: "0xE60175510c6D44D9b71339CF26da9e9DcAc76915", decimals: 18 },
    { symbol: "DAI", address: "0xe33f954364B743E50C658761694ee7Eb58247693", decimals: 18 },
  ],
  confirmations: 0,
  smartWallets: true,
  swaps: true,
};

/** The second simulated network: fixed, documented chain id and token addresses of its own. */
const SANDBOX_B = {
  ...SANDBOX_A,
  id: "sandbox-b",
  caip2: "eip155:73570002",
  name: "Sandbox B",
  chainId: 73_570_002,
  default: false,
  tokens: [
    { symbol: "ETH", address: null, decimals: 18 },
    { symbol: "USDC", address: "0x29840E9CeDf837FBEEE1cCF1b8F42A64Ce49080A", decimals: 6 },
    { symbol: "ADAO", address: "0x263B2D76f98d13eF404b770766cc36508aaCe893", decimals: 18 },
    { symbol: "DAI", address: "0x6ab098F5005887B1e625aB42d84b34eC8fC3BD7C", decimals: 18 },
  ],
};

describe("the network directory", () => {
  it("names the old variables' chain `default`, with its CAIP-2 id, tokens and what it offers", () => {
    const directory = new NetworkDirectory(loadConfig({ ...LIVE, LIVE_DAI_ADDRESS: DAI }));
    expect(directory.list("live")).toEqual({
      environment: "live",
      default: "default",
      networks: [
        {
          id: "default",
          caip2: "eip155:8453",
          name: "Base",
          chainId: 8453,
          simulated: false,
          default: true,
          tokens: [
            { symbol: "ETH", address: null, decimals: 18 },
            { symbol: "USDC", address: USDC, decimals: 6 },
            { symbol: "ADAO", address: ADAO, decimals: 18 },
            { symbol: "DAI", address: DAI, decimals: 18 },
          ],
          confirmations: 3,
          smartWallets: false,
          swaps: false,
        },
      ],
    });
    expect(directory.list("sandbox")).toEqual({
      environment: "sandbox",
      default: "sandbox-a",
      networks: [SANDBOX_A, SANDBOX_B],
    });
  });

  it("offers smart wallets and swaps where a bundler and Uniswap are configured", () => {
    const config = loadConfig({
      ...LIVE,
      LIVE_CHAIN_ID: "84532",
      LIVE_BUNDLER_URL: "http://127.0.0.1:9/bundler",
      LIVE_PAYMASTER_ADDRESS: "0x3000000000000000000000000000000000000003",
      LIVE_SWAP_ROUTER_ADDRESS: "0x4000000000000000000000000000000000000001",
      LIVE_SWAP_QUOTER_ADDRESS: "0x4000000000000000000000000000000000000002",
      LIVE_SWAP_FACTORY_ADDRESS: "0x4000000000000000000000000000000000000003",
      LIVE_WETH_ADDRESS: "0x4000000000000000000000000000000000000004",
    });
    const [network] = new NetworkDirectory(config).list("live").networks;
    expect(network).toMatchObject({
      name: "Chain 84532",
      caip2: "eip155:84532",
      smartWallets: true,
      swaps: true,
    });
  });

  it("a request naming no network goes to the default; one naming another is refused, not redirected", () => {
    const directory = new NetworkDirectory(loadConfig(LIVE));
    expect(directory.resolve("live", undefined)).toBe("default");
    expect(directory.resolve("live", "default")).toBe("default");
    expect(directory.resolveField("sandbox", undefined)).toBe("sandbox-a");
    const unknown = (() => {
      try {
        directory.resolve("live", "polygon");
      } catch (err) {
        return err;
      }
    })();
    expect(unknown).toBeInstanceOf(UnknownNetwork);
    expect(unknown).toMatchObject({
      code: "INVALID_REQUEST",
      message: "Unknown network",
      details: { network: "polygon" },
    });
    expect(directory.resolve("sandbox", "sandbox-b")).toBe("sandbox-b");
    expect(() => directory.resolve("sandbox", "sandbox-c")).toThrow(UnknownNetwork);
    // Another environment's network is not this one's.
    expect(() => directory.resolve("sandbox", "default")).toThrow(UnknownNetwork);
    for (const bad of [5, "", ["default"], { id: "default" }]) {
      expect(() => directory.resolveField("live", bad)).toThrow(InvalidRequest);
      expect(() => directory.resolveField("live", bad)).toThrow(/^network must be a network id/);
    }
  });

  it("live without a chain has no networks and no default; naming one is refused", () => {
    const directory = new NetworkDirectory(loadConfig({}));
    expect(directory.list("live")).toEqual({ environment: "live", default: null, networks: [] });
    expect(directory.resolve("live", undefined)).toBeNull();
    expect(() => directory.resolve("live", "default")).toThrow(UnknownNetwork);
  });
});

describe("GET /api/v1/networks", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp(LIVE);
  });
  afterAll(() => t?.close());

  it("lists the key's environment's networks: a sandbox key the sandbox's, a live key live's", async () => {
    const ws = await createWorkspace(t);
    const sandbox = await t.request({ method: "GET", url: "/api/v1/networks", headers: bearer(ws.testKey) });
    expect(sandbox.statusCode, sandbox.body).toBe(200);
    expect(sandbox.json()).toEqual({
      environment: "sandbox",
      default: "sandbox-a",
      networks: [SANDBOX_A, SANDBOX_B],
    });

    const live = await t.request({ method: "GET", url: "/api/v1/networks", headers: bearer(ws.liveKey) });
    expect(live.statusCode, live.body).toBe(200);
    expect(live.json()).toMatchObject({
      environment: "live",
      default: "default",
      networks: [{ id: "default", caip2: "eip155:8453", chainId: 8453, confirmations: 3, default: true }],
    });
  });

  it("answers 401 without a key", async () => {
    const res = await t.request({ method: "GET", url: "/api/v1/networks" });
    expect(res.statusCode).toBe(401);
    expect(res.json()).toEqual({ error: expect.any(String) });
  });
});

describe("a request's network (D22): the default when absent, refused when the environment has no such network", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp(LIVE);
  });
  afterAll(() => t?.close());

  const call = (method: "GET" | "POST", key: string, url: string, payload?: Record<string, unknown>) =>
    t.request({ method, url, headers: bearer(key), ...(payload === undefined ? {} : { payload }) });
  const unknown = (res: { statusCode: number; json(): unknown; body: string }, network: string) => {
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json()).toEqual({ error: "Unknown network", network });
  };
  const crypto = { paymentMethod: "crypto", tokenSymbol: "USDC", amount: "5.00" };
  /** A payer's 2 USDC to the workspace wallet on the sandbox's network: an open inbox transfer. */
  const incoming = async (ws: { testKey: string }) =>
    (
      await call("POST", ws.testKey, "/api/v1/sandbox/incoming-transfer", {
        tokenSymbol: "USDC",
        amount: "2",
      })
    ).json().transfer;
  /** A record as if it had arrived on another network of the environment. */
  const moveTo = (table: "payments" | "unmatched_transfers", id: string, network: string) =>
    t.database.db.updateTable(table).set({ network }).where("id", "=", id).execute();

  it("payments: network or networks name the sandbox's network; another, an empty list, both, or on a card payment → 400", async () => {
    const ws = await createWorkspace(t);
    for (const body of [
      { ...crypto },
      { ...crypto, network: "sandbox-a" },
      { ...crypto, networks: ["sandbox-a"] },
    ]) {
      const res = await call("POST", ws.testKey, "/api/v1/payments", body);
      expect(res.statusCode, res.body).toBe(201);
    }
    unknown(await call("POST", ws.testKey, "/api/v1/payments", { ...crypto, network: "polygon" }), "polygon");
    unknown(
      await call("POST", ws.testKey, "/api/v1/payments", { ...crypto, networks: ["sandbox-a", "base"] }),
      "base",
    );
    // The live network is live's, not the sandbox's.
    unknown(await call("POST", ws.testKey, "/api/v1/payments", { ...crypto, network: "default" }), "default");
    const refusals: Array<[Record<string, unknown>, RegExp]> = [
      [{ ...crypto, networks: [] }, /^networks must be a non-empty list of network ids/],
      [{ ...crypto, networks: "sandbox-a" }, /^networks must be a non-empty list/],
      [{ ...crypto, networks: ["sandbox-a", "sandbox-a"] }, /^networks must not name a network twice$/],
      [{ ...crypto, network: "sandbox-a", networks: ["sandbox-a"] }, /^Give network or networks, not both$/],
      [{ ...crypto, network: 7 }, /^network must be a network id/],
      [
        { paymentMethod: "card", tokenSymbol: "USD", amount: "5.00", network: "sandbox-a" },
        /^network and networks apply to crypto payments only$/,
      ],
    ];
    for (const [body, message] of refusals) {
      const res = await call("POST", ws.testKey, "/api/v1/payments", body);
      expect(res.statusCode, res.body).toBe(400);
      expect(res.json().error).toMatch(message);
    }
    const listed = await call("GET", ws.testKey, "/api/v1/payments?limit=100");
    expect(listed.json().total).toBe(3);
  });

  it("a sandbox payment payable on both simulated networks names its address on each and completes on the first", async () => {
    const ws = await createWorkspace(t);
    const res = await call("POST", ws.testKey, "/api/v1/payments", {
      ...crypto,
      networks: ["sandbox-b", "sandbox-a"],
    });
    expect(res.statusCode, res.body).toBe(201);
    const body = res.json();
    expect(body.receivingAddresses).toEqual({ "sandbox-b": ws.eoaAddress, "sandbox-a": ws.eoaAddress });
    expect(body.receivingAddress).toBe(ws.eoaAddress);
    expect(body.payment).toMatchObject({
      status: "forwarded",
      network: "sandbox-b",
      networks: ["sandbox-b", "sandbox-a"],
    });
    // Its money is on sandbox-b, where it completed (D5: a sandbox payment completes at creation).
    const balance = (await call("GET", ws.testKey, "/api/v1/wallet/balance")).json();
    expect(balance.networks["sandbox-b"].eoa.balances.USDC).toBe("4.925");
    expect(balance.networks["sandbox-a"].eoa.balances.USDC).toBe("0.00");
    const read = (await call("GET", ws.testKey, `/api/v1/payments/${body.payment.id}`)).json().payment;
    expect(read.networks).toEqual(["sandbox-b", "sandbox-a"]);
    // A payment of one network shows no list.
    const single = (await call("POST", ws.testKey, "/api/v1/payments", crypto)).json();
    expect(single.payment.network).toBe("sandbox-a");
    expect("networks" in single.payment).toBe(false);
    expect("receivingAddresses" in single).toBe(false);
  });

  it("payouts, the faucet and incoming transfers: another network → 400 and nothing moves", async () => {
    const ws = await createWorkspace(t);
    const credit = { tokenSymbol: "USDC", amount: "10" };
    unknown(await call("POST", ws.testKey, "/api/v1/sandbox/faucet", { ...credit, network: "base" }), "base");
    expect(
      (await call("POST", ws.testKey, "/api/v1/sandbox/faucet", { ...credit, network: "sandbox-a" }))
        .statusCode,
    ).toBe(200);
    const payout = {
      tokenSymbol: "USDC",
      amount: "1",
      destinationAddress: "0x3000000000000000000000000000000000000003",
    };
    unknown(await call("POST", ws.testKey, "/api/v1/payouts", { ...payout, network: "base" }), "base");
    unknown(
      await call("POST", ws.testKey, "/api/v1/sandbox/incoming-transfer", {
        ...credit,
        network: "sandbox-c",
      }),
      "sandbox-c",
    );
    const balance = await call("GET", ws.testKey, "/api/v1/wallet/balance");
    expect(balance.json().eoa.balances.USDC).toBe("10.00");
    expect((await call("GET", ws.testKey, "/api/v1/transfers/unmatched")).json().total).toBe(0);
    const paid = await call("POST", ws.testKey, "/api/v1/payouts", { ...payout, network: "sandbox-a" });
    expect(paid.statusCode, paid.body).toBe(200);
    // A live key names live's networks: the sandbox's is unknown there.
    unknown(
      await call("POST", ws.liveKey, "/api/v1/payouts", { ...payout, network: "sandbox-a" }),
      "sandbox-a",
    );
  });

  it("refunds, swaps and on-ramp sessions: another network → 400; a card payment's refund names none", async () => {
    const ws = await createWorkspace(t);
    const payment = (await call("POST", ws.testKey, "/api/v1/payments", crypto)).json().payment;
    const refunds = `/api/v1/payments/${payment.id}/refunds`;
    unknown(await call("POST", ws.testKey, refunds, { amount: "1.00", network: "base" }), "base");
    const card = (
      await call("POST", ws.testKey, "/api/v1/payments", {
        paymentMethod: "card",
        tokenSymbol: "USD",
        amount: "5.00",
      })
    ).json().payment;
    const cardRefund = await call("POST", ws.testKey, `/api/v1/payments/${card.id}/refunds`, {
      network: "sandbox-a",
    });
    expect(cardRefund.statusCode, cardRefund.body).toBe(400);
    expect(cardRefund.json().error).toBe("network does not apply to a card payment's refund");
    expect((await call("GET", ws.testKey, refunds)).json().total).toBe(0);
    const refunded = await call("POST", ws.testKey, refunds, {
      amount: "1.00",
      destinationAddress: "0x3000000000000000000000000000000000000003",
      network: "sandbox-a",
    });
    expect(refunded.statusCode, refunded.body).toBe(201);

    unknown(
      await call(
        "GET",
        ws.testKey,
        "/api/v1/swap/quote?sellToken=USDC&buyToken=ETH&sellAmount=1&network=base",
      ),
      "base",
    );
    unknown(
      await call("POST", ws.testKey, "/api/v1/swap", {
        sellToken: "USDC",
        buyToken: "ETH",
        sellAmount: "1",
        network: "base",
      }),
      "base",
    );
    unknown(
      await call("POST", ws.testKey, "/api/v1/onramp/session", {
        destinationCurrency: "USDC",
        sourceAmount: "10.00",
        network: "base",
      }),
      "base",
    );
    expect((await call("GET", ws.testKey, "/api/v1/swaps")).json().total).toBe(0);
    expect((await call("GET", ws.testKey, "/api/v1/onramp/sessions")).json().total).toBe(0);
  });

  it("every record names its network: payments (null for a card), transfers, refunds, the inbox, swaps, on-ramp sessions, events", async () => {
    const ws = await createWorkspace(t);
    const created = (await call("POST", ws.testKey, "/api/v1/payments", crypto)).json();
    expect(created.payment.network).toBe("sandbox-a");
    // Live's network here has no node (port 9): a payment there is refused, naming it (D22).
    const live = await call("POST", ws.liveKey, "/api/v1/payments", crypto);
    expect({ status: live.statusCode, body: live.json() }).toEqual({
      status: 503,
      body: { error: "Network unavailable", network: "default" },
    });
    const card = await call("POST", ws.testKey, "/api/v1/payments", {
      paymentMethod: "card",
      tokenSymbol: "USD",
      amount: "5.00",
    });
    expect(card.json().payment.network).toBeNull();
    const fetched = await call("GET", ws.testKey, `/api/v1/payments/${created.payment.id}`);
    expect(fetched.json().payment.network).toBe("sandbox-a");

    const payout = await call("POST", ws.testKey, "/api/v1/payouts", {
      tokenSymbol: "USDC",
      amount: "1",
      destinationAddress: "0x3000000000000000000000000000000000000003",
    });
    expect(payout.statusCode, payout.body).toBe(200);
    expect(payout.json().payout.network).toBe("sandbox-a");
    const refund = await call("POST", ws.testKey, `/api/v1/payments/${created.payment.id}/refunds`, {
      amount: "1.00",
      destinationAddress: "0x3000000000000000000000000000000000000003",
    });
    expect(refund.statusCode, refund.body).toBe(201);
    expect(refund.json().refund.network).toBe("sandbox-a");
    const incoming = await call("POST", ws.testKey, "/api/v1/sandbox/incoming-transfer", {
      tokenSymbol: "USDC",
      amount: "2",
    });
    expect(incoming.json().transfer.network).toBe("sandbox-a");

    const quote = await call(
      "GET",
      ws.testKey,
      "/api/v1/swap/quote?sellToken=USDC&buyToken=ETH&sellAmount=1",
    );
    expect(quote.statusCode, quote.body).toBe(200);
    expect(quote.json().network).toBe("sandbox-a");
    const swap = await call("POST", ws.testKey, "/api/v1/swap", { quoteId: quote.json().quoteId });
    expect(swap.statusCode, swap.body).toBe(200);
    expect(swap.json().network).toBe("sandbox-a");
    const onramp = await call("POST", ws.testKey, "/api/v1/onramp/session", {
      destinationCurrency: "USDC",
      sourceAmount: "10.00",
    });
    expect(onramp.statusCode, onramp.body).toBe(201);
    expect(onramp.json().network).toBe("sandbox-a");

    // The events carry the same objects (a card payment's has no network; live's is live's).
    const events = await t.database.db
      .selectFrom("outbox_events")
      .select(["event_type", "environment", "payload"])
      .where("workspace_id", "=", ws.id)
      .where("event_type", "in", ["payment.created", "payout.completed", "refund.completed"])
      .execute();
    const networks = events.map((e) => [
      e.event_type,
      e.environment,
      (e.payload as { network?: unknown }).network,
    ]);
    expect(networks).toEqual(
      expect.arrayContaining([
        ["payment.created", "sandbox", "sandbox-a"],
        ["payment.created", "sandbox", null],
        ["payout.completed", "sandbox", "sandbox-a"],
        ["refund.completed", "sandbox", "sandbox-a"],
      ]),
    );
    expect(networks).toHaveLength(4);
  });

  it("an inbox transfer attaches only to a payment of its own network", async () => {
    const ws = await createWorkspace(t);
    const pending = { id: await pendingPayment(t, ws, "2000000") };
    const transfer = await incoming(ws);
    // The same transfer as if it had arrived on another network of the environment.
    await moveTo("unmatched_transfers", transfer.id, "sandbox-b");
    const attach = await call("POST", ws.testKey, `/api/v1/transfers/unmatched/${transfer.id}/attach`, {
      paymentId: pending.id,
    });
    expect(attach.statusCode, attach.body).toBe(400);
    expect(attach.json()).toMatchObject({
      error: "The transfer arrived on network sandbox-b, the payment is on sandbox-a",
      transferNetwork: "sandbox-b",
      paymentNetwork: "sandbox-a",
    });
    const payment = (await call("GET", ws.testKey, `/api/v1/payments/${pending.id}`)).json().payment;
    expect(payment.status).toBe("pending");
  });

  it("a network's settlement takes its own confirmed payments only", async () => {
    const ws = await createWorkspace(t);
    const onA = await pendingPayment(t, ws, "3000000");
    const onB = await pendingPayment(t, ws, "4000000");
    await moveTo("payments", onB, "sandbox-b");
    await t.database.db
      .updateTable("payments")
      .set({ status: "confirmed" })
      .where("id", "in", [onA, onB])
      .execute();
    const dueOn = async (id: string) =>
      (await due(t.database.db, { environment: "sandbox", id }, "confirmed", 100))
        .map((row) => row.id)
        .filter((found) => found === onA || found === onB);
    expect(await dueOn("sandbox-a")).toEqual([onA]);
    expect(await dueOn("sandbox-b")).toEqual([onB]);
  });

  it("a refund or a return goes back on the network the money arrived on, never another", async () => {
    const ws = await createWorkspace(t);
    const payment = (await call("POST", ws.testKey, "/api/v1/payments", crypto)).json().payment;
    const transfer = await incoming(ws);
    // As if both had arrived on another network of the environment than the one named below.
    await moveTo("payments", payment.id, "sandbox-b");
    await moveTo("unmatched_transfers", transfer.id, "sandbox-b");
    const destinationAddress = "0x3000000000000000000000000000000000000003";
    const refund = await call("POST", ws.testKey, `/api/v1/payments/${payment.id}/refunds`, {
      amount: "1.00",
      destinationAddress,
      network: "sandbox-a",
    });
    expect(refund.statusCode, refund.body).toBe(400);
    expect(refund.json()).toEqual({
      error: "The payment's money arrived on network sandbox-b: it goes back on that network",
      network: "sandbox-a",
      arrivedOn: "sandbox-b",
    });
    const returned = await call("POST", ws.testKey, `/api/v1/transfers/unmatched/${transfer.id}/return`, {
      network: "sandbox-a",
    });
    expect(returned.statusCode, returned.body).toBe(400);
    expect(returned.json().error).toBe(
      "The transfer's money arrived on network sandbox-b: it goes back on that network",
    );
    expect((await call("GET", ws.testKey, `/api/v1/payments/${payment.id}/refunds`)).json().total).toBe(0);
  });
});
