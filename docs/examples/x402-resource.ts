// A merchant's Express route behind the stock x402 middleware, settled by this service (docs/x402.md).
import { HTTPFacilitatorClient, x402ResourceServer } from "@x402/core/server";
import { ExactEvmScheme } from "@x402/evm/exact/server";
import { paymentMiddleware } from "@x402/express";
import express from "express";

export function weatherApp(
  service: string,
  apiKey: string,
  price: { network: `${string}:${string}`; usdc: string; payTo: string },
) {
  const auth = { Authorization: `Bearer ${apiKey}` };
  const facilitator = new HTTPFacilitatorClient({
    url: `${service}/api/v1/x402`,
    createAuthHeaders: async () => ({ verify: auth, settle: auth, supported: auth }),
  });
  const server = new x402ResourceServer(facilitator).register("eip155:*", new ExactEvmScheme());
  const accepts = {
    scheme: "exact",
    network: price.network,
    payTo: price.payTo,
    maxTimeoutSeconds: 120,
    price: { amount: "10000", asset: price.usdc, extra: { name: "USDC", version: "2" } },
  }; // 0.01 USDC
  return express()
    .use(paymentMiddleware({ "GET /weather": { accepts, description: "Today's weather" } }, server))
    .get("/weather", (_req, res) => {
      res.json({ weather: "sunny" });
    });
}
