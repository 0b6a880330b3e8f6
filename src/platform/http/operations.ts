// The operation ids of the OpenAPI document (/openapi.json), in one table so they read as one
// vocabulary: the typed SDK (sdk/) and every client generated from the document name its calls
// after them, so an id, once published, does not change. A route may name its own
// (`schema.operationId`); test/system/openapi-document.test.ts fails when a route has neither.

/** `METHOD /path/{param}` → operation id. */
export const OPERATION_IDS: Readonly<Record<string, string>> = {
  "POST /api/v1/workspaces": "createWorkspace",
  "GET /api/v1/workspaces/{id}": "getWorkspace",
  "PATCH /api/v1/workspaces/{id}": "updateWorkspace",
  "PUT /api/v1/workspaces/{id}/logo": "setWorkspaceLogo",
  "DELETE /api/v1/workspaces/{id}/logo": "removeWorkspaceLogo",
  "POST /api/v1/keys": "createKey",
  "GET /api/v1/keys": "listKeys",
  "DELETE /api/v1/keys/{id}": "revokeKey",
  "GET /api/v1/networks": "listNetworks",

  "POST /api/v1/payments": "createPayment",
  "GET /api/v1/payments": "listPayments",
  "GET /api/v1/payments/export.csv": "exportPayments",
  "GET /api/v1/payments/{id}": "getPayment",
  "POST /api/v1/payments/{id}/cancel": "cancelPayment",
  "POST /api/v1/verify": "verifyPayment",
  "GET /api/v1/transfers/unmatched": "listUnmatchedTransfers",
  "POST /api/v1/transfers/unmatched/{id}/attach": "attachUnmatchedTransfer",
  "POST /api/v1/transfers/unmatched/{id}/keep": "keepUnmatchedTransfer",
  "POST /api/v1/transfers/unmatched/{id}/return": "returnUnmatchedTransfer",
  "POST /api/v1/sandbox/incoming-transfer": "simulateIncomingTransfer",
  "POST /api/v1/payments/{id}/refunds": "createRefund",
  "GET /api/v1/payments/{id}/refunds": "listRefunds",

  "GET /api/v1/swap/quote": "quoteSwap",
  "POST /api/v1/swap": "executeSwap",
  "GET /swap/quote": "quoteSwapUnversioned",
  "POST /swap": "executeSwapUnversioned",
  "GET /api/v1/swaps": "listSwaps",
  "GET /api/v1/swaps/{id}": "getSwap",
  "POST /api/v1/onramp/session": "createOnrampSession",
  "POST /onramp/session": "createOnrampSessionUnversioned",
  "GET /api/v1/onramp/sessions/{id}": "getOnrampSession",
  "GET /api/v1/onramp/sessions": "listOnrampSessions",

  "GET /api/v1/splits": "getSplits",
  "PUT /api/v1/splits": "replaceSplits",
  "GET /api/v1/settlements": "listSettlements",
  "GET /api/v1/settlements/{id}": "getSettlement",

  "POST /api/v1/webhooks": "createWebhook",
  "GET /api/v1/webhooks": "listWebhooks",
  "DELETE /api/v1/webhooks/{id}": "deleteWebhook",
  "POST /api/v1/webhooks/{id}/rotate-secret": "rotateWebhookSecret",
  "GET /api/v1/webhooks/{id}/deliveries": "listWebhookDeliveries",
  "POST /api/v1/webhooks/{id}/deliveries/{deliveryId}/retry": "retryWebhookDelivery",

  "POST /api/v1/payouts": "createPayout",
  "GET /api/v1/payouts": "listPayouts",
  "GET /api/v1/payouts/export.csv": "exportPayouts",
  "POST /api/v1/workspaces/{id}/resume": "resumePayouts",
  "GET /api/v1/workspaces/{id}/payout-state": "getPayoutState",
  "GET /api/v1/wallet/balance": "getWalletBalance",
  "GET /api/v1/wallet/stats": "getWalletStats",
  "POST /api/v1/sandbox/faucet": "sandboxFaucet",
  "POST /api/webhooks/card": "receiveCardEvent",

  "POST /api/v1/workspaces/{id}/smart-wallet": "createSmartWallet",
  "GET /api/v1/workspaces/{id}/smart-wallet": "getSmartWallet",
  "PATCH /api/v1/workspaces/{id}/smart-wallet": "setDefaultWallet",
  "POST /api/workspaces/smart-wallet": "dashboardCreateSmartWallet",
  "PATCH /api/workspaces/smart-wallet": "dashboardSetDefaultWallet",

  "POST /api/agents/create": "createAgent",
  "GET /api/agents/{agentId}": "getAgent",
  "PATCH /api/agents/{agentId}": "updateAgent",
  "DELETE /api/agents/{agentId}": "deleteAgent",
  "GET /api/agents": "listAgents",
  "POST /api/wallets/create": "createWallet",
  "GET /api/wallets/{walletId}": "getWallet",
  "GET /api/wallets": "listWallets",
  "GET /api/wallets/{walletId}/balance/{currency}": "getWalletCurrencyBalance",
  "POST /api/wallets/{walletId}/currencies": "addWalletCurrency",

  "GET /api/wallets/{walletId}/policy": "getSpendingPolicy",
  "PUT /api/wallets/{walletId}/policy": "setSpendingPolicy",
  "POST /api/wallets/{walletId}/x402/pay": "payX402",
  "GET /api/wallets/{walletId}/x402/authorizations": "listAgentPaymentAuthorizations",
  "GET /api/wallets/{walletId}/x402/authorizations/{authorizationId}": "getAgentPaymentAuthorization",
  "POST /api/wallets/{walletId}/x402/authorizations/{authorizationId}/approve": "approveAgentPayment",
  "POST /api/wallets/{walletId}/x402/authorizations/{authorizationId}/deny": "denyAgentPayment",
};

/** A Fastify route path as the document writes it: `/a/:id` → `/a/{id}`. */
export function documentPath(url: string): string {
  return url.replace(/:([A-Za-z0-9_]+)/g, "{$1}");
}
