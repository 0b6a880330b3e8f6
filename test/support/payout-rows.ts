import { randomUUID } from "node:crypto";
import { SANDBOX_A } from "../../src/chain/simulated/networks.ts";
import type { Environment } from "../../src/config.ts";
import type { NewTransfer } from "../../src/modules/transfers/repo.ts";
import { LIVE_DEFAULT } from "./devnet-env.ts";

// A payout as the service records one, for the suites that write it straight to the database
// (another instance's payout, a claim racing a reconciler): a plain EOA payout of USDC from the
// workspace's EOA, with what the test is about given in `fields`.

export function newPayout(
  ws: { id: string; eoaAddress: string },
  environment: Environment,
  fields: Pick<NewTransfer, "idempotencyKey" | "amount" | "destinationAddress">,
): NewTransfer {
  return {
    id: randomUUID(),
    scope: { workspaceId: ws.id, environment },
    // The one network each environment has in these suites: the chain's, or the ledger's.
    network: environment === "live" ? LIVE_DEFAULT.id : SANDBOX_A.id,
    tokenSymbol: "USDC",
    fromAddress: ws.eoaAddress,
    walletType: "eoa",
    description: null,
    metadata: {},
    createdAt: new Date(),
    kind: "payout",
    paymentId: null,
    unmatchedTransferId: null,
    reason: null,
    ...fields,
  };
}
