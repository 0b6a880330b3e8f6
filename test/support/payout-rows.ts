import { randomUUID } from "node:crypto";
import type { Environment } from "../../src/config.ts";
import type { NewTransfer } from "../../src/modules/transfers/repo.ts";

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
