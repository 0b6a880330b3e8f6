import { randomBytes } from "node:crypto";
import type { BlockRef, Hex, IncomingTransfer, Network } from "../../src/chain/network.ts";

// The chain the watcher's suite (test/payments/chain-watcher.test.ts) writes itself: blocks of
// transfers, repeats and reorgs, behind the Network port; what the watcher does not use throws.

export const hex = (bytes: number) => `0x${randomBytes(bytes).toString("hex")}` as Hex;
export const PAYER = hex(20);

export interface ScriptedBlock extends BlockRef {
  transfers: IncomingTransfer[];
}

/** A chain the test writes: blocks of transfers; `reorg` replaces the newest blocks. */
export class ScriptedChain implements Network {
  readonly environment = "live" as const;
  readonly id = "default";
  readonly caip2 = "eip155:31337";
  readonly name = "Scripted chain";
  readonly chainId = 31337;
  readonly confirmations: number;
  readonly treasuryAddress = hex(20);
  readonly tokens = ["ETH", "USDC", "ADAO"] as const;
  blocks: ScriptedBlock[] = [];
  /** Transfers every later incomingTransfers call returns again, as a node repeating a log would. */
  repeated: IncomingTransfer[] = [];

  constructor(confirmations = 3) {
    this.confirmations = confirmations;
    this.mine([]);
  }

  /** A new block holding `transfers` (to, amount[, token]); returns the transfers as mined. */
  mine(transfers: Array<{ to: string; amount: bigint; token?: "USDC" | "ETH" }>): IncomingTransfer[] {
    const number = BigInt(this.blocks.length);
    const hash = hex(32);
    const mined = transfers.map((t, i) => ({
      token: t.token ?? "USDC",
      from: PAYER,
      to: t.to as Hex,
      amount: t.amount,
      txHash: hex(32),
      logIndex: t.token === "ETH" ? -1 : i,
      blockNumber: number,
      blockHash: hash,
    }));
    this.blocks.push({ number, hash, transfers: mined });
    return mined;
  }

  /** A new block holding transfers mined before (same transaction and log index), as a re-inclusion. */
  include(transfers: IncomingTransfer[]): ScriptedBlock {
    this.mine([]);
    const block = this.blocks.at(-1) as ScriptedBlock;
    block.transfers = transfers.map((t) => ({ ...t, blockNumber: block.number, blockHash: block.hash }));
    return block;
  }

  /** Drops the newest `depth` blocks and mines `depth + 1` empty ones in their place. */
  reorg(depth: number): void {
    this.blocks.splice(this.blocks.length - depth, depth);
    for (let i = 0; i <= depth; i++) this.mine([]);
  }

  async head(): Promise<BlockRef> {
    const last = this.blocks.at(-1) as ScriptedBlock;
    return { number: last.number, hash: last.hash };
  }

  async block(number: bigint): Promise<BlockRef | null> {
    const block = this.blocks[Number(number)];
    return block ? { number: block.number, hash: block.hash } : null;
  }

  async incomingTransfers(from: bigint, to: bigint, recipients: readonly Hex[]): Promise<IncomingTransfer[]> {
    const wanted = new Set(recipients.map((r) => r.toLowerCase()));
    return [
      ...this.blocks.slice(Number(from), Number(to) + 1).flatMap((b) => b.transfers),
      ...this.repeated,
    ].filter((t) => wanted.has(t.to.toLowerCase()));
  }

  async transactionBlock(txHash: Hex): Promise<BlockRef | null> {
    const block = this.blocks.find((b) => b.transfers.some((t) => t.txHash === txHash));
    return block ? { number: block.number, hash: block.hash } : null;
  }

  async balance(): Promise<bigint> {
    return 0n;
  }

  accountAt(): never {
    throw new Error("not used by the watcher");
  }
  userOperationsIn(): never {
    throw new Error("not used by the watcher");
  }
  transactionLogs(): never {
    throw new Error("not used by the watcher");
  }
  pendingNonce(): Promise<number> {
    throw new Error("not used by the watcher");
  }
  minedNonce(): Promise<number> {
    throw new Error("not used by the watcher");
  }
  fees(): never {
    throw new Error("not used by the watcher");
  }
  transferGas(): never {
    throw new Error("not used by the watcher");
  }
  signTransfer(): never {
    throw new Error("not used by the watcher");
  }
  signCancel(): never {
    throw new Error("not used by the watcher");
  }
  known(): never {
    throw new Error("not used by the watcher");
  }
  gasCost(): never {
    throw new Error("not used");
  }
  transferGasCost(): never {
    throw new Error("not used by the watcher");
  }
  broadcast(): never {
    throw new Error("not used by the watcher");
  }
  receipt(): never {
    throw new Error("not used by the watcher");
  }
  waitForReceipt(): never {
    throw new Error("not used by the watcher");
  }
  x402(): never {
    throw new Error("not used by the watcher");
  }
  authorizationUse(): never {
    throw new Error("not used by the watcher");
  }
  async close(): Promise<void> {}
}
