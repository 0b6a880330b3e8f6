import { randomUUID } from "node:crypto";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { createPublicClient, encodeFunctionData, erc20Abi, type Hex, http } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { type Devnet, rpc } from "../src/devnet/chain.ts";
import * as repo from "../src/modules/payments/repo.ts";
import type { PaymentRow } from "../src/platform/db/schema.ts";

// What the chain watcher benchmarks share (chain-watcher.ts, chain-watcher-networks.ts): pending
// payments of their own amounts, and a backlog of blocks of matching transfers mined while no
// watcher runs.

export interface Pending {
  id: string;
  to: Hex;
  amount: bigint;
}

/**
 * The `index`-th of `count` pending USDC payments of `network` to the workspace EOA `ws`, each of
 * an amount of its own (10 USDC + index × 0.001), created in order.
 */
export function pendingPaymentRow(
  ws: { id: string; address: Hex },
  network: string,
  index: number,
  count: number,
  now: number,
): PaymentRow {
  const gross = 10_000_000n + BigInt(index) * 1_000n;
  const fee = (gross * 15n) / 1000n;
  return repo.newPaymentRow({
    id: randomUUID(),
    status: "pending",
    workspaceId: ws.id,
    environment: "live",
    network,
    paymentMethod: "crypto",
    paymentProvider: "onchain",
    tokenSymbol: "USDC",
    gross,
    fee,
    net: gross - fee,
    merchantWallet: "0x2222222222222222222222222222222222222222",
    walletType: "eoa",
    receivingAddress: ws.address,
    description: null,
    metadata: {},
    returnUrl: null,
    cancelUrl: null,
    expiresAt: new Date(now + 24 * 3_600_000),
    createdAt: new Date(now - count + index),
  });
}

export const pendingOf = (row: PaymentRow): Pending => ({
  id: row.id,
  to: row.receiving_address as Hex,
  amount: BigInt(row.gross_amount),
});

/**
 * Mines `targets` as USDC transfers from the devnet's payer, `perBlock` to a block, with the
 * devnet's own mining switched off (it stays off); answers the head and how long it took.
 */
export async function mineBacklog(
  devnet: Devnet,
  targets: readonly Pending[],
  perBlock: number,
): Promise<{ head: bigint; buildMs: number }> {
  await rpc(devnet.rpcUrl, "evm_setIntervalMining", [0]);
  await rpc(devnet.rpcUrl, "evm_setAutomine", [false]);
  const start = performance.now();
  const payer = privateKeyToAccount(devnet.accounts.payer.privateKey);
  const client = createPublicClient({ chain: devnet.chain, transport: http(devnet.rpcUrl) });
  let nonce = await client.getTransactionCount({ address: payer.address, blockTag: "pending" });
  const latest = await client.getBlock();
  const maxFeePerGas = (latest.baseFeePerGas ?? 1_000_000_000n) * 4n + 2_000_000_000n;
  const signed: Hex[] = [];
  for (const target of targets) {
    signed.push(
      await payer.signTransaction({
        type: "eip1559",
        chainId: devnet.chainId,
        to: devnet.tokens.USDC,
        data: encodeFunctionData({
          abi: erc20Abi,
          functionName: "transfer",
          args: [target.to, target.amount],
        }),
        nonce: nonce++,
        gas: 100_000n,
        maxFeePerGas,
        maxPriorityFeePerGas: 1_000_000_000n,
      }),
    );
  }
  let lastHash: Hex | undefined;
  for (let b = 0; b * perBlock < signed.length; b++) {
    const hashes = await Promise.all(
      signed
        .slice(b * perBlock, (b + 1) * perBlock)
        .map((raw) => rpc(devnet.rpcUrl, "eth_sendRawTransaction", [raw]) as Promise<Hex>),
    );
    lastHash = hashes.at(-1);
    await rpc(devnet.rpcUrl, "evm_mine", []);
  }
  if (lastHash) {
    const last = await client.getTransactionReceipt({ hash: lastHash });
    if (last.status !== "success") throw new Error("a backlog transfer failed");
  }
  return { head: await client.getBlockNumber(), buildMs: performance.now() - start };
}

/**
 * A node as a remote one answers (`--rpc-latency-ms`): every HTTP request to `target` answered
 * `ms` later, a batch as one request. On 127.0.0.1; stopped by `close`.
 */
export async function latencyProxy(
  target: string,
  ms: number,
): Promise<{ url: string; close: () => Promise<void> }> {
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    await new Promise((done) => setTimeout(done, ms));
    try {
      const upstream = await fetch(target, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: Buffer.concat(chunks),
      });
      res.writeHead(upstream.status, { "content-type": "application/json" }).end(await upstream.text());
    } catch {
      req.socket.destroy(); // the node is gone: as a connection it refuses
    }
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
