// What the agent payment suites (test/wallets/agent-payments*.test.ts) share: x402 requirements on
// the sandbox's simulated networks, and the check that a PAYMENT-SIGNATURE value is an EIP-3009
// authorization the wallet's key signed.

import { decodePaymentSignatureHeader } from "@x402/core/http";
import type { PaymentPayload } from "@x402/core/types";
import { sql } from "kysely";
import { getAddress, type Hex, verifyTypedData } from "viem";
import { expect } from "vitest";
import { TRANSFER_WITH_AUTHORIZATION_TYPES } from "../../src/chain/eip3009.ts";
import { SANDBOX_A, SANDBOX_B } from "../../src/chain/simulated/networks.ts";
import { call, createAgent, createWallet, type Json, t } from "./agents-and-wallets.ts";
import type { CreatedWorkspace } from "./app.ts";

export const PAYEE = "0x2222222222222222222222222222222222222222";
export const OTHER_PAYEE = "0x3333333333333333333333333333333333333333";
export const RESOURCE = "https://api.example.com/weather?city=Paris";

/** An x402 v2 requirement: `amount` USDC units on sandbox-a, to PAYEE, valid 60 s. */
export function requirement(fields: Json = {}): Json {
  return {
    scheme: "exact",
    network: `eip155:${SANDBOX_A.chainId}`,
    asset: SANDBOX_A.tokens.USDC,
    amount: "1500000",
    payTo: PAYEE,
    maxTimeoutSeconds: 60,
    extra: { name: "USDC", version: "2" },
    ...fields,
  };
}

/** The same on sandbox-b. */
export const onSandboxB = (fields: Json = {}) =>
  requirement({ network: `eip155:${SANDBOX_B.chainId}`, asset: SANDBOX_B.tokens.USDC, ...fields });

/** A server's PaymentRequired (x402 v2) offering `accepts`. */
export function paymentRequired(...accepts: Json[]): Json {
  return {
    x402Version: 2,
    error: "PAYMENT-SIGNATURE header is required",
    resource: { url: RESOURCE, description: "Weather", mimeType: "application/json" },
    accepts: accepts.length > 0 ? accepts : [requirement()],
  };
}

/** `amount` (decimal USDC) as the smallest-unit string a requirement carries. */
export const usdcUnits = (amount: string) => {
  const [whole = "0", fraction = ""] = amount.split(".");
  return (BigInt(whole) * 1_000_000n + BigInt(fraction.padEnd(6, "0") || "0")).toString();
};

export function pay(key: string, walletId: string, body: Json) {
  return call(key, "POST", `/api/wallets/${walletId}/x402/pay`, body);
}

/** Pays `amount` USDC to PAYEE for RESOURCE (other requirement fields from `fields`). */
export function payUsdc(
  key: string,
  walletId: string,
  amount: string,
  fields: Json = {},
  resource = RESOURCE,
) {
  return pay(key, walletId, {
    paymentRequired: paymentRequired(requirement({ amount: usdcUnits(amount), ...fields })),
    resource,
  });
}

export function putPolicy(key: string, walletId: string, policy: Json) {
  return call(key, "PUT", `/api/wallets/${walletId}/policy`, policy);
}

/** A new agent with a USDC wallet in `ws`'s sandbox. */
export async function agentWallet(ws: CreatedWorkspace, currencies = ["USDC"]): Promise<Json> {
  const agent = await createAgent(ws.testKey, { name: "Paying agent" });
  return createWallet(ws.testKey, { ownerId: agent.agentId, type: "agent", currencies });
}

interface Authorization {
  from: Hex;
  to: Hex;
  value: string;
  validAfter: string;
  validBefore: string;
  nonce: Hex;
}

/**
 * Decodes a PAYMENT-SIGNATURE value with @x402/core and checks its EIP-3009 authorization: signed
 * by `wallet`'s key for `expected`'s token (EIP-712 domain of its extra.name/version, chain id and
 * asset), to its payTo, for its amount. Answers the payload and its authorization.
 */
export async function expectSignedFor(
  paymentSignature: string,
  walletAddress: string,
  expected: Json,
): Promise<{ payload: PaymentPayload; authorization: Authorization }> {
  const payload = decodePaymentSignatureHeader(paymentSignature);
  expect(payload.x402Version).toBe(2);
  expect(payload.accepted).toEqual(expected);
  const authorization = payload.payload.authorization as Authorization;
  const signature = payload.payload.signature as Hex;
  expect(getAddress(authorization.from)).toBe(getAddress(walletAddress));
  expect(getAddress(authorization.to)).toBe(getAddress(expected.payTo));
  expect(authorization.value).toBe(expected.amount);
  expect(authorization.nonce).toMatch(/^0x[0-9a-f]{64}$/);
  const valid = await verifyTypedData({
    address: getAddress(walletAddress),
    domain: {
      name: expected.extra.name,
      version: expected.extra.version,
      chainId: Number(String(expected.network).split(":")[1]),
      verifyingContract: getAddress(expected.asset),
    },
    types: TRANSFER_WITH_AUTHORIZATION_TYPES,
    primaryType: "TransferWithAuthorization",
    message: {
      from: authorization.from,
      to: authorization.to,
      value: BigInt(authorization.value),
      validAfter: BigInt(authorization.validAfter),
      validBefore: BigInt(authorization.validBefore),
      nonce: authorization.nonce,
    },
    signature,
  });
  expect(valid, "the EIP-712 signature recovers to the wallet's address").toBe(true);
  return { payload, authorization };
}

/** The wallet's authorizations as stored: how many, and their amounts' sum (smallest units). */
export async function storedAuthorizations(walletId: string): Promise<{ count: number; sum: bigint }> {
  const { rows } = await sql<{ count: string; sum: string }>`
    SELECT count(*)::text AS count, coalesce(sum(amount), 0)::text AS sum
    FROM agent_payment_authorizations WHERE wallet_id = ${walletId}`.execute(t.database.db);
  return { count: Number(rows[0]?.count ?? 0), sum: BigInt(rows[0]?.sum ?? 0) };
}

/** The agent.payment.* events written for one authorization, oldest first. */
export async function eventsOf(authorizationId: string): Promise<Array<{ type: string; data: Json }>> {
  const rows = await t.database.db
    .selectFrom("outbox_events")
    .select(["event_type", "payload"])
    .where(sql<boolean>`payload->>'authorizationId' = ${authorizationId}`)
    .orderBy("id")
    .execute();
  return rows.map((row) => ({ type: row.event_type, data: row.payload }));
}
