import type { ChainToken, Hex } from "../../chain/network.ts";
import type { SimulatedLedger } from "../../chain/simulated/ledger.ts";
import type { AuthorizationUse } from "../../chain/x402-scheme.ts";
import type { Environment } from "../../config.ts";
import type { AppContext } from "../../context.ts";
import { AGENT_PAYMENT_TRANSITIONS } from "../../domain/agent-payment-state.ts";
import { recordEvents } from "../webhooks/outbox.ts";
import { authorizationView } from "./agent-payments.ts";
import * as repo from "./agent-payments-repo.ts";

// How an agent's signed x402 payment ends (D23): once its nonce is used on its network — by our
// facilitator or anyone's — the reservation becomes a spend (`settled`, with the transaction, in
// the wallet's history); once its validity is over unused, the reservation is released
// (`expired`). Each is one transaction with its event. The network answers (its token's
// authorizationState), never this service's memory, so any instance may run it.

/**
 * After validBefore, how long an authorization is still watched before it expires: a transaction
 * mined in a block stamped just before validBefore can reach the node a little later.
 */
export const EXPIRY_GRACE_MS = 60_000;
/** Authorizations looked at per tick. */
const PER_TICK = 200;

export class AgentPaymentOutcomes {
  readonly #ctx: AppContext;
  readonly #ledger: SimulatedLedger;

  constructor(ctx: AppContext, ledger: SimulatedLedger) {
    this.#ctx = ctx;
    this.#ledger = ledger;
  }

  /** Settles the authorizations whose nonce was used and expires those that lapsed unused: how many ended. */
  async tick(): Promise<number> {
    const open = await repo.openAuthorizations(this.#ctx.db, PER_TICK);
    // Asked all at once: a network's transport sends the calls made together in one request, so a
    // tick costs a round trip to each node rather than one per authorization.
    const uses = await Promise.allSettled(open.map((row) => this.#use(row)));
    let ended = 0;
    for (const [i, row] of open.entries()) {
      const read = uses[i];
      try {
        if (!read || read.status === "rejected") throw read?.reason;
        const use = read.value;
        const lapsed =
          row.valid_before !== null &&
          this.#ctx.now().getTime() > row.valid_before.getTime() + EXPIRY_GRACE_MS;
        if (use.used) ended += await this.#end(row, "settled", use.txHash);
        else if (lapsed) ended += await this.#end(row, "expired", null);
      } catch (err) {
        // One network's trouble leaves the others' authorizations to this tick; this one waits for the next.
        this.#ctx.log.error({ err, authorizationId: row.id }, "an agent payment's outcome could not be read");
      }
    }
    return ended;
  }

  /** Whether the authorization's nonce was used on its network: the chain's token, or the sandbox's ledger. */
  async #use(row: repo.AuthorizationRow): Promise<AuthorizationUse> {
    const environment = row.environment as Environment;
    const token = row.currency as ChainToken;
    const nonce = row.nonce as Hex;
    const chain = this.#ctx.chains.of(environment, row.network);
    if (chain) return chain.network.authorizationUse(token, row.payer as Hex, nonce);
    const txHash = await this.#ledger.authorizationTx(row.network, token, row.payer, nonce);
    return txHash === null ? { used: false } : { used: true, txHash: txHash as Hex };
  }

  async #end(
    row: repo.AuthorizationRow,
    trigger: "settled" | "expired",
    txHash: string | null,
  ): Promise<number> {
    return this.#ctx.db.transaction().execute(async (trx) => {
      const moved = await repo.endAuthorization(trx, row.id, trigger, txHash);
      if (!moved) return 0; // another instance ended it first
      const event = AGENT_PAYMENT_TRANSITIONS[trigger].event;
      await recordEvents(trx, [
        {
          workspaceId: moved.workspace_id,
          environment: moved.environment as Environment,
          type: event,
          payload: { ...authorizationView(moved) },
        },
      ]);
      return 1;
    });
  }
}
