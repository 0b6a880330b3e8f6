import {
  type Address,
  createWalletClient,
  encodeFunctionData,
  http,
  parseAbi,
  parseEther,
  parseUnits,
} from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Devnet, startDevnet } from "../../src/devnet/chain.ts";
import { createWorkers, type Workers } from "../../src/workers.ts";
import {
  bearer,
  type CreatedWorkspace,
  createWorkspace,
  startTestApp,
  type TestApp,
} from "../support/app.ts";
import { type DevnetClients, devnetClients } from "../support/devnet-clients.ts";
import { liveSmartWalletEnv } from "../support/devnet-env.ts";
import { until } from "../support/poll.ts";
import { createSmartWallet, liveSwapEnv, postSwap, quoteSwap } from "../support/swaps.ts";

// What a swap buys reaches the wallet, which is also where customers pay: it must never be taken
// for a payment (D16 beside D4/D19). The pool pays the router, which hands the proceeds on to the
// wallet, and the chain watcher knows the service's own swaps: a pending payment of exactly
// the amount a swap buys stays pending, and nothing lands in the unmatched inbox; a real payment
// made after the swap is still seen (the watcher went past the swap's block). Only the service's
// own swaps are set aside, by the transaction (or user operation) it recorded: anyone else's swap
// through the same public router that pays the wallet is a payer's transfer like any other. And
// ETH sent to the router and not swapped (an exact output's rest) always comes back.

const randomAddress = () => privateKeyToAccount(generatePrivateKey()).address;

/** SwapRouter as anyone may call it. */
const STRANGER_ROUTER_ABI = parseAbi([
  "function exactOutputSingle((address tokenIn, address tokenOut, uint24 fee, address recipient, uint256 deadline, uint256 amountOut, uint256 amountInMaximum, uint160 sqrtPriceLimitX96) params) payable returns (uint256 amountIn)",
  "function sweepToken(address token, uint256 amountMinimum, address recipient) payable",
  "function refundETH() payable",
  "function multicall(bytes[] data) payable returns (bytes[] results)",
]);

let devnet: Devnet;
let t: TestApp;
let workers: Workers;
let clients: DevnetClients;

beforeAll(async () => {
  devnet = await startDevnet({ accountAbstraction: true, swaps: true });
  const aa = devnet.aa;
  if (!aa) throw new Error("no ERC-4337 stack");
  t = await startTestApp(
    liveSmartWalletEnv(devnet, aa, { ...liveSwapEnv(devnet), LIVE_GAS_TOPUP_THRESHOLD_WEI: "0" }),
  );
  clients = devnetClients(devnet);
  workers = createWorkers(t.app, { dispatcher: { pollIntervalMs: 50 } });
  workers.start();
}, 180_000);

afterAll(async () => {
  await workers?.stop();
  await t?.close();
  await devnet?.stop();
});

async function api(ws: CreatedWorkspace, method: "GET" | "POST", url: string, payload?: unknown) {
  return t.request({ method, url, headers: bearer(ws.liveKey), ...(payload ? { payload } : {}) });
}

async function newPayment(ws: CreatedWorkspace, amount: string, walletType: "eoa" | "smart_wallet") {
  const res = await api(ws, "POST", "/api/v1/payments", {
    tokenSymbol: "USDC",
    amount,
    merchantWallet: randomAddress(),
    walletType,
  });
  expect(res.statusCode, res.body).toBe(201);
  return { id: res.json().payment.id as string, receivingAddress: res.json().receivingAddress as Address };
}

async function statusOf(ws: CreatedWorkspace, id: string): Promise<string> {
  return (await api(ws, "GET", `/api/v1/payments/${id}`)).json().payment.status;
}

describe("a swap's proceeds are not a payment", () => {
  it("leaves a pending payment of exactly the bought amount pending, from the EOA and the smart wallet", async () => {
    const ws = await createWorkspace(t);
    const smart = await createSmartWallet(t, ws);
    await clients.credit(ws.eoaAddress, { USDC: "10", ETH: "2" });
    await clients.credit(smart, { USDC: "10", ETH: "1" });
    const onEoa = await newPayment(ws, "100.00", "eoa");
    const onSmart = await newPayment(ws, "50.00", "smart_wallet");
    expect(onEoa.receivingAddress.toLowerCase()).toBe(ws.eoaAddress.toLowerCase());
    expect(onSmart.receivingAddress.toLowerCase()).toBe(smart.toLowerCase());

    const bought: string[] = [];
    for (const [walletType, buyAmount] of [
      ["eoa", "100"],
      ["smart_wallet", "50"],
    ] as const) {
      const quote = await quoteSwap(t, ws.liveKey, {
        sellToken: "ETH",
        buyToken: "USDC",
        buyAmount,
        walletType,
      });
      const swap = await postSwap(t, ws.liveKey, { quoteId: quote.quoteId });
      expect(swap.statusCode, swap.body).toBe(200);
      expect(swap.json()).toMatchObject({ status: "completed", buyAmount: `${buyAmount}.00` });
      bought.push(swap.json().txHash);
    }

    // A real payment after the swaps: once the watcher has seen it, it has seen the swaps' blocks.
    const later = await newPayment(ws, "1.25", "eoa");
    await clients.fund(later.receivingAddress, { USDC: "1.25" });
    await until(
      "the later payment to be detected",
      () => statusOf(ws, later.id),
      (status) => status !== "pending",
      30_000,
    );

    expect(await statusOf(ws, onEoa.id)).toBe("pending");
    expect(await statusOf(ws, onSmart.id)).toBe("pending");
    const inbox = await api(ws, "GET", "/api/v1/transfers/unmatched");
    expect(inbox.statusCode, inbox.body).toBe(200);
    const hashes = JSON.stringify(inbox.json()).toLowerCase();
    for (const hash of bought) expect(hashes).not.toContain(hash.toLowerCase());
  }, 90_000);

  it("takes a stranger's swap through the same router, paying the wallet, for a payment", async () => {
    const ws = await createWorkspace(t);
    const payment = await newPayment(ws, "7.00", "eoa");
    const swap = devnet.swap;
    const pool = swap?.pools.find((p) => p.token0Symbol === "WETH" || p.token1Symbol === "WETH");
    if (!swap || !pool) throw new Error("no USDC/WETH pool on the devnet");
    const stranger = createWalletClient({
      account: privateKeyToAccount(generatePrivateKey()),
      chain: devnet.chain,
      transport: http(devnet.rpcUrl),
    });
    await clients.fund(stranger.account.address, { ETH: "1" });
    // As the service's own swaps do: bought into the router, then handed on to the recipient.
    const hash = await stranger.writeContract({
      address: swap.router,
      abi: STRANGER_ROUTER_ABI,
      functionName: "multicall",
      value: parseEther("0.1"),
      args: [
        [
          encodeFunctionData({
            abi: STRANGER_ROUTER_ABI,
            functionName: "exactOutputSingle",
            args: [
              {
                tokenIn: swap.weth,
                tokenOut: devnet.tokens.USDC,
                fee: pool.fee,
                recipient: swap.router,
                deadline: BigInt(Math.floor(Date.now() / 1000) + 600),
                amountOut: parseUnits("7", 6),
                amountInMaximum: parseEther("0.1"),
                sqrtPriceLimitX96: 0n,
              },
            ],
          }),
          encodeFunctionData({
            abi: STRANGER_ROUTER_ABI,
            functionName: "sweepToken",
            args: [devnet.tokens.USDC, parseUnits("7", 6), ws.eoaAddress as Address],
          }),
          encodeFunctionData({ abi: STRANGER_ROUTER_ABI, functionName: "refundETH" }),
        ],
      ],
    });
    expect((await clients.chain.waitForTransactionReceipt({ hash })).status).toBe("success");
    await until(
      "the payment to be detected",
      () => statusOf(ws, payment.id),
      (status) => status !== "pending",
      30_000,
    );
    const paid = (await api(ws, "GET", `/api/v1/payments/${payment.id}`)).json().payment;
    expect(paid).toMatchObject({ txHash: hash });
    expect(String(paid.payerAddress).toLowerCase()).toBe(swap.router.toLowerCase());
  }, 60_000);

  it("keeps no ETH in the router after ETH sales, exact input or exact output", async () => {
    const ws = await createWorkspace(t);
    await clients.credit(ws.eoaAddress, { ETH: "2" });
    const router = devnet.swap?.router as Address;
    for (const params of [{ sellAmount: "0.2" }, { buyAmount: "150" }]) {
      const quote = await quoteSwap(t, ws.liveKey, { sellToken: "ETH", buyToken: "USDC", ...params });
      const swap = await postSwap(t, ws.liveKey, { quoteId: quote.quoteId });
      expect(swap.json().status, swap.body).toBe("completed");
      expect(await clients.chain.getBalance({ address: router })).toBe(0n);
    }
    // What the exact output did not use came back: the wallet paid exactly what it sold, plus gas.
    expect(
      parseEther("2") - (await clients.chain.getBalance({ address: ws.eoaAddress as Address })),
    ).toBeGreaterThan(parseUnits("0.2", 18));
  }, 60_000);
});
