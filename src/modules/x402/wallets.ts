import { LRUCache } from "lru-cache";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import type { Chain } from "../../chain/chains.ts";
import type { Hex } from "../../chain/network.ts";
import type { SubmittedTransfer } from "../../chain/sent-types.ts";
import type { FacilitatorCall, FacilitatorOutcome } from "../../chain/x402-scheme.ts";
import type { AppContext } from "../../context.ts";
import { X402_SETTLEMENT_PURPOSE } from "../../domain/x402.ts";
import type { Fence } from "../../platform/db/fences.ts";
import { topUpWallet } from "../payments/settlement/gas-top-up.ts";
import * as repo from "./repo.ts";

// Each workspace's facilitator wallet (D23): a key the service holds (encrypted at rest) that sends
// the workspace's x402 settlements and pays their gas, apart from the wallets whose money is
// reserved for payouts and settlements. The gas top-up job keeps it funded like the workspace
// EOAs. On a chain its transactions go through the network's nonce-ordered sender, recorded
// before broadcast (the payment they pay naming them in the same transaction), so instances never
// reuse a nonce and the watcher always knows which payment a settlement's transfer pays.

export class FacilitatorWallets {
  readonly #ctx: AppContext;
  /** A workspace's facilitator address never changes once written (one row, never updated): kept here. */
  readonly #addresses = new LRUCache<string, Hex>({ max: 10_000 });

  constructor(ctx: AppContext) {
    this.#ctx = ctx;
  }

  /** The workspace's facilitator wallet, made on first use. */
  async addressOf(workspaceId: string): Promise<Hex> {
    const known = this.#addresses.get(workspaceId);
    if (known) return known;
    const found =
      (await repo.findFacilitatorWallet(this.#ctx.db, workspaceId)) ?? (await this.#create(workspaceId));
    this.#addresses.set(workspaceId, found.address as Hex);
    return found.address as Hex;
  }

  /** Writes a new wallet unless another request (or instance) wrote one first: the one kept. */
  #create(workspaceId: string): Promise<repo.FacilitatorWalletRow> {
    const key = generatePrivateKey();
    return repo.insertFacilitatorWallet(this.#ctx.db, workspaceId, {
      address: privateKeyToAccount(key).address,
      encrypted_private_key: this.#ctx.secrets.encrypt(key),
    });
  }

  /** Every facilitator wallet, for the gas top-up job. */
  addresses(): Promise<string[]> {
    return repo.facilitatorAddresses(this.#ctx.db);
  }

  /**
   * Makes sure the workspace's facilitator wallet can pay for `call`'s gas on `chain`, topping it up
   * from the network's gas funder now (a wallet made a moment ago has none until the periodic
   * job's next round); throws, before anything is recorded, when it cannot.
   */
  async ensureGas(chain: Chain, address: Hex, call: FacilitatorCall): Promise<void> {
    const needed = await chain.network.gasCost(call.gas);
    const { log, metrics } = this.#ctx;
    const topUp = await topUpWallet(chain.network, chain.config, chain.sender, address, needed, log, metrics);
    if (topUp !== "funded")
      throw new Error(
        topUp === "pending"
          ? "the facilitator wallet's gas top-up is still on its way"
          : "the facilitator wallet has no gas and none can be had (no gas funder)",
      );
  }

  /**
   * Sends `call` from the workspace's facilitator wallet on `chain`, recorded (with the payment it
   * pays) before it is broadcast; resolves once the node has it or refused it.
   */
  async send(
    chain: Chain,
    workspaceId: string,
    call: FacilitatorCall,
    /** The statement that names the signed transaction on the payment it pays, run with its record. */
    expect: (txHash: Hex) => Fence,
  ): Promise<SubmittedTransfer> {
    const row = await repo.findFacilitatorWallet(this.#ctx.db, workspaceId);
    if (!row) throw new Error("the workspace has no facilitator wallet");
    const key = this.#ctx.secrets.decrypt(row.encrypted_private_key) as Hex;
    const [submitted] = await chain.sender.submit(
      key,
      row.address as Hex,
      [
        {
          token: "ETH",
          to: call.to,
          // It moves nothing of the wallet's but gas: the payer's tokens go to the payee.
          amount: 0n,
          call: { data: call.data, value: 0n, gas: call.gas },
          // Not the payment's own money leaving (its settlement legs carry its id): the payment
          // names this transaction instead (`expect`).
          purpose: X402_SETTLEMENT_PURPOSE,
        },
      ],
      { signedFences: ([txHash]) => (txHash ? [expect(txHash)] : []) },
    );
    if (!submitted) throw new Error("the settlement was not recorded");
    return submitted;
  }

  /** How a transaction `send` answered ended: waited for (bounded) by the sender, its events once mined. */
  async outcome(chain: Chain, submitted: SubmittedTransfer): Promise<FacilitatorOutcome> {
    const [sent] = await chain.sender.receipts([submitted]);
    const status = sent?.status ?? "not_found";
    return {
      status,
      logs: status === "success" ? await chain.network.transactionLogs(submitted.txHash) : [],
    };
  }
}
