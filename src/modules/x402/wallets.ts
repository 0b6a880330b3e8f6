import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import type { Chain } from "../../chain/chains.ts";
import type { Hex } from "../../chain/network.ts";
import type { SubmittedTransfer } from "../../chain/sent-types.ts";
import type { FacilitatorCall, FacilitatorOutcome } from "../../chain/x402-scheme.ts";
import type { AppContext } from "../../context.ts";
import { X402_SETTLEMENT_PURPOSE } from "../../domain/x402.ts";
import type { Fence } from "../../platform/db/fences.ts";
import * as repo from "./repo.ts";

// Each workspace's facilitator wallet (D23): a key the service holds (encrypted at rest) that sends
// the workspace's x402 settlements and pays their gas, apart from the wallets whose money is
// reserved for payouts and settlements. The gas top-up job keeps it funded like the workspace
// EOAs. On a chain its transactions go through the network's nonce-ordered sender, recorded
// before broadcast (the payment they pay naming them in the same transaction), so instances never
// reuse a nonce and the watcher always knows which payment a settlement's transfer pays.

export class FacilitatorWallets {
  readonly #ctx: AppContext;

  constructor(ctx: AppContext) {
    this.#ctx = ctx;
  }

  /** The workspace's facilitator wallet, made on first use. */
  async addressOf(workspaceId: string): Promise<Hex> {
    const found = await repo.findFacilitatorWallet(this.#ctx.db, workspaceId);
    if (found) return found.address as Hex;
    const key = generatePrivateKey();
    const kept = await repo.insertFacilitatorWallet(this.#ctx.db, workspaceId, {
      address: privateKeyToAccount(key).address,
      encrypted_private_key: this.#ctx.secrets.encrypt(key),
    });
    return kept.address as Hex;
  }

  /** Every facilitator wallet, for the gas top-up job. */
  addresses(): Promise<string[]> {
    return repo.facilitatorAddresses(this.#ctx.db);
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
