// An agent paying x402 resources with its agent wallet held by this service: the stock fetch
// wrapper with a scheme that asks the service to sign under the wallet's policy (docs/x402.md).
import { x402Client } from "@x402/core/client";
import { decodePaymentSignatureHeader } from "@x402/core/http";
import type { PaymentRequired } from "@x402/core/types";
import { wrapFetchWithPayment } from "@x402/fetch";

export function agentFetch(service: string, apiKey: string, walletId: string) {
  return async (url: string, init?: RequestInit) => {
    let asked: PaymentRequired | undefined; // the 402's PaymentRequired, for the service's policy
    const client = new x402Client().setSpendControls(false).onBeforePaymentCreation(async (c) => {
      asked = { ...c.paymentRequired, accepts: [c.selectedRequirements] };
    });
    client.register("eip155:*", {
      scheme: "exact",
      createPaymentPayload: async () => {
        const res = await fetch(`${service}/api/wallets/${walletId}/x402/pay`, {
          method: "POST",
          headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
          body: JSON.stringify({ paymentRequired: asked, resource: url }),
        });
        const body = await res.json();
        if (res.status !== 200) throw new Error(`not paid: ${res.status} ${JSON.stringify(body)}`);
        return decodePaymentSignatureHeader(body.data.paymentSignature);
      },
    });
    return wrapFetchWithPayment(fetch, client)(url, init);
  };
}
