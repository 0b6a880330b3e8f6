import type { Environment } from "../../config.ts";
import type { TransitionResult } from "../../domain/payment-state.ts";
import type { PaymentRow } from "../../platform/db/schema.ts";
import type { CheckoutSession } from "../card/provider.ts";
import type { CreatePaymentResponse, Decided } from "./create.ts";
import type * as repo from "./repo.ts";
import type { SandboxSettlement } from "./sandbox-settlement.ts";
import { settlementEvents } from "./settlement/settlement-record.ts";
import type { PaymentView } from "./view.ts";

// What a new payment announces and answers (create.ts): its events and its 201 body.

/** payment.created (as pending), the sandbox's completion, and the sandbox settlement's events. */
export function newEvents(
  row: PaymentRow,
  view: PaymentView,
  completed: TransitionResult | null,
  sandbox: SandboxSettlement | null,
): repo.NewPaymentWrite["events"] {
  const scope = { workspaceId: row.workspace_id, environment: row.environment as Environment };
  return [
    { ...scope, type: "payment.created", payload: { ...view, status: "pending" } },
    ...(completed?.ok && completed.event ? [{ ...scope, type: completed.event, payload: { ...view } }] : []),
    ...(sandbox ? settlementEvents(row) : []),
  ];
}

export function responseOf(
  view: PaymentView,
  { request, receivingAddress, networks }: Decided,
  session: CheckoutSession | undefined,
  publicBaseUrl: string,
): CreatePaymentResponse {
  const crypto = request.paymentMethod === "crypto" && receivingAddress;
  return {
    payment: view,
    paymentMethod: request.paymentMethod,
    paymentProvider: view.paymentProvider,
    ...(crypto ? { receivingAddress } : {}),
    // One address on every EVM network (the workspace EOA; the smart wallet where its factory
    // has the same address), named per network so a client need not know that.
    ...(crypto && networks
      ? { receivingAddresses: Object.fromEntries(networks.map((id) => [id, receivingAddress])) }
      : {}),
    ...(session ? { checkoutUrl: session.url, cardCheckoutSessionId: session.id } : {}),
    paymentUrl: `${publicBaseUrl}/pay/${view.id}`,
  };
}
