import { createPublicClient, createWalletClient, erc20Abi, http, type PublicClient, parseEther } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type Devnet,
  mine,
  mintToken,
  PAYER_TOKEN_BALANCE,
  revert,
  snapshot,
  startDevnet,
  TOKENS,
  type TokenSymbol,
} from "../../src/devnet/chain.ts";

// Starts a real Hardhat node (EDR) on a free port: the devnet that `npm run devnet` runs and that
// the chain watcher's tests build on.

const SYMBOLS = Object.keys(TOKENS) as TokenSymbol[];

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe("devnet", () => {
  let devnet: Devnet;
  let client: PublicClient;

  beforeAll(async () => {
    devnet = await startDevnet();
    client = createPublicClient({
      chain: devnet.chain,
      transport: http(devnet.rpcUrl, { retryCount: 0 }),
      pollingInterval: 50,
    });
  });

  afterAll(async () => {
    await devnet?.stop();
  });

  it("answers on 127.0.0.1 with Hardhat's chain id", async () => {
    expect(devnet.rpcUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(devnet.chainId).toBe(31337);
    expect(await client.getChainId()).toBe(31337);
  });

  it("uses distinct well-known accounts, funded by the node", async () => {
    const { deployer, treasury, gasFunder, payer } = devnet.accounts;
    const addresses = [deployer, treasury, gasFunder, payer].map((a) => a.address.toLowerCase());
    expect(new Set(addresses).size).toBe(4);
    const wallet = createWalletClient({ transport: http(devnet.rpcUrl, { retryCount: 0 }) });
    const nodeAccounts = (await wallet.getAddresses()).map((a) => a.toLowerCase());
    for (const address of addresses) expect(nodeAccounts).toContain(address);
    // The gas funder and the payer never sent a transaction: they keep their genesis ETH.
    expect(await client.getBalance({ address: gasFunder.address })).toBe(parseEther("10000"));
    expect(await client.getBalance({ address: payer.address })).toBe(parseEther("10000"));
  });

  it("deploys USDC (6), ADAO (18) and DAI (18) with the payer holding plenty of each", async () => {
    for (const symbol of SYMBOLS) {
      const address = devnet.tokens[symbol];
      expect(address).toMatch(/^0x[0-9a-fA-F]{40}$/);
      const read = <F extends "symbol" | "decimals">(functionName: F) =>
        client.readContract({ address, abi: erc20Abi, functionName });
      expect(await read("symbol")).toBe(symbol);
      expect(await read("decimals")).toBe(TOKENS[symbol].decimals);
      const balance = await client.readContract({
        address,
        abi: erc20Abi,
        functionName: "balanceOf",
        args: [devnet.accounts.payer.address],
      });
      expect(balance).toBe(PAYER_TOKEN_BALANCE * 10n ** BigInt(TOKENS[symbol].decimals));
    }
    expect(new Set(Object.values(devnet.tokens)).size).toBe(3);
  });

  it("mines a block about every second without transactions", async () => {
    const first = await client.getBlockNumber({ cacheTime: 0 });
    // A fixed wait on purpose: the blocks mined in 3.5 s of wall time are what is measured.
    await new Promise((r) => setTimeout(r, 3500));
    const last = await client.getBlockNumber({ cacheTime: 0 });
    const mined = Number(last - first);
    expect(mined).toBeGreaterThanOrEqual(2);
    expect(mined).toBeLessThanOrEqual(5);
    const newest = await client.getBlock({ blockNumber: last });
    const previous = await client.getBlock({ blockNumber: last - 1n });
    expect(newest.transactions).toHaveLength(0);
    // A block takes the wall clock's second (blocks of one second may share it: hardhat.config.js),
    // so two blocks about a second apart are 0 to 2 seconds apart on the chain's clock.
    expect(Number(newest.timestamp - previous.timestamp)).toBeGreaterThanOrEqual(0);
    expect(Number(newest.timestamp - previous.timestamp)).toBeLessThanOrEqual(2);
    expect(Math.abs(Number(newest.timestamp) - Date.now() / 1000)).toBeLessThan(5);
  });

  it("mines each transaction at once (automine) and mints on demand", async () => {
    const to = devnet.accounts.treasury.address;
    const before = await client.readContract({
      address: devnet.tokens.USDC,
      abi: erc20Abi,
      functionName: "balanceOf",
      args: [to],
    });
    const started = performance.now();
    const hash = await mintToken(devnet, "USDC", to, "12.5");
    expect(performance.now() - started).toBeLessThan(900); // well before the next interval block
    const receipt = await client.getTransactionReceipt({ hash });
    expect(receipt.status).toBe("success");
    const after = await client.readContract({
      address: devnet.tokens.USDC,
      abi: erc20Abi,
      functionName: "balanceOf",
      args: [to],
    });
    expect(after - before).toBe(12_500_000n);
  });

  it("reverts to a snapshot, once", async () => {
    const to = devnet.accounts.treasury.address;
    const balanceOf = () =>
      client.readContract({
        address: devnet.tokens.DAI,
        abi: erc20Abi,
        functionName: "balanceOf",
        args: [to],
      });
    const before = await balanceOf();
    const blockBefore = await client.getBlockNumber({ cacheTime: 0 });
    const id = await snapshot(devnet);
    await mintToken(devnet, "DAI", to, 5n * 10n ** 18n);
    await mine(devnet, 3);
    expect(await balanceOf()).toBe(before + 5n * 10n ** 18n);
    expect(await client.getBlockNumber({ cacheTime: 0 })).toBeGreaterThanOrEqual(blockBefore + 4n);
    await revert(devnet, id);
    expect(await balanceOf()).toBe(before);
    expect(await client.getBlockNumber({ cacheTime: 0 })).toBeLessThanOrEqual(blockBefore + 2n);
    await expect(revert(devnet, id)).rejects.toThrow(/unknown or already used/);
    // The deployer's nonce went back too: minting still works after the revert.
    await mintToken(devnet, "DAI", to, "1");
    expect(await balanceOf()).toBe(before + 10n ** 18n);
  });

  it("stops the node process and frees the port", async () => {
    const { pid } = devnet;
    expect(processAlive(pid)).toBe(true);
    await devnet.stop();
    expect(processAlive(pid)).toBe(false);
    await expect(client.getChainId()).rejects.toThrow();
    await devnet.stop(); // idempotent
  });
});
