import type { AddressInfo } from "node:net";
import { HTTPFacilitatorClient, x402ResourceServer } from "@x402/core/server";
import type { Network, PaymentPayload, PaymentRequirements } from "@x402/core/types";
import { ExactEvmScheme as ExactEvmClientScheme } from "@x402/evm/exact/client";
import { ExactEvmScheme as ExactEvmServerScheme } from "@x402/evm/exact/server";
import { UptoEvmScheme as UptoEvmClientScheme } from "@x402/evm/upto/client";
import { UptoEvmScheme as UptoEvmServerScheme } from "@x402/evm/upto/server";
import { paymentMiddleware, setSettlementOverrides } from "@x402/express";
import { wrapFetchWithPayment, x402Client } from "@x402/fetch";
import express from "express";
import type { Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";

// x402 as a merchant and an agent use it, against our facilitator: the stock Express middleware
// pointed at `<service>/api/v1/x402` with the workspace key, and the stock fetch wrapper paying
// with a payer's key. Servers listen on 127.0.0.1 and are closed by the tests.

export interface PricedRoute {
  network: Network;
  asset: string;
  /** In the token's smallest unit. */
  amount: string;
  payTo: string;
  extra?: Record<string, unknown>;
  /** upto: the route is priced at `amount` at most and settles `used` of it (x402's settlement overrides). */
  upto?: { used: string };
}

export interface Resource {
  url: string;
  close(): Promise<void>;
}

/** An Express app with `GET /weather` behind the stock x402 middleware, using our facilitator. */
export async function paidResource(
  serviceUrl: string,
  apiKey: string,
  price: PricedRoute,
): Promise<Resource> {
  const auth = { Authorization: `Bearer ${apiKey}` };
  const facilitator = new HTTPFacilitatorClient({
    url: `${serviceUrl}/api/v1/x402`,
    createAuthHeaders: async () => ({ verify: auth, settle: auth, supported: auth }),
  });
  const server = new x402ResourceServer(facilitator)
    .register("eip155:*", new ExactEvmServerScheme())
    .register("eip155:*", new UptoEvmServerScheme());
  const app = express();
  app.use(
    paymentMiddleware(
      {
        "GET /weather": {
          accepts: {
            scheme: price.upto ? "upto" : "exact",
            network: price.network,
            payTo: price.payTo,
            price: {
              amount: price.amount,
              asset: price.asset,
              extra: price.extra ?? { name: "USDC", version: "2" },
            },
            maxTimeoutSeconds: 120,
          },
          description: "Today's weather",
        },
      },
      server,
    ),
  );
  app.get("/weather", (_req, res) => {
    if (price.upto) setSettlementOverrides(res, { amount: price.upto.used });
    res.json({ weather: "sunny" });
  });
  const listening = app.listen(0, "127.0.0.1");
  await new Promise<void>((resolve) => listening.once("listening", () => resolve()));
  const { port } = listening.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/weather`,
    close: () => new Promise<void>((resolve) => listening.close(() => resolve())),
  };
}

/**
 * The stock fetch wrapper, paying with `key`'s EIP-3009 authorizations (exact) or Permit2 ones (upto). Its spend controls allow
 * the asset the caller names (a devnet's or the sandbox's USDC is no default asset of x402's).
 */
export function payingFetch(key: Hex, asset: { network: Network; asset: string }): typeof fetch {
  const client = new x402Client()
    .register("eip155:*", new ExactEvmClientScheme(privateKeyToAccount(key)))
    .register("eip155:*", new UptoEvmClientScheme(privateKeyToAccount(key)))
    .setSpendControls({ allowedAssets: [asset] });
  return wrapFetchWithPayment(fetch, client);
}

/** A payment payload signed by `key` for `accepted`, as the stock client makes it. */
export async function signedPayment(key: Hex, accepted: PaymentRequirements): Promise<PaymentPayload> {
  const account = privateKeyToAccount(key);
  const scheme =
    accepted.scheme === "upto" ? new UptoEvmClientScheme(account) : new ExactEvmClientScheme(account);
  const { payload } = await scheme.createPaymentPayload(2, accepted);
  return { x402Version: 2, accepted, payload };
}
