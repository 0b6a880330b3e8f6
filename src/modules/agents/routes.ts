import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "typebox";
import { WALLET_TYPES } from "../../domain/money.ts";
import { requireKey } from "../../platform/http/auth.ts";
import { NumberedPage } from "../../platform/http/schemas.ts";
import { documentedBodyOnly } from "../../platform/http/validation.ts";
import type { AgentWalletsService } from "../wallets/service.ts";
import {
  AgentSchema,
  Currency,
  DeletedAgentSchema,
  Ok,
  Page,
  WalletBalanceSchema,
  WalletSchema,
  WalletWithBalancesSchema,
} from "./schemas.ts";
import type { AgentsService } from "./service.ts";

// /api/agents and /api/wallets (parts 4.16, 4.17): results wrapped as {success, data}; errors
// as {success: false, error} (the error handler shapes them for these prefixes).

const AgentBody = Type.Object({
  name: Type.String({ minLength: 1, maxLength: 200 }),
  description: Type.Optional(Type.String({ maxLength: 1000 })),
  metadata: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
});
const tags = (tag: string) => ({ tags: [tag], security: [{ apiKey: [] }] });

export const agentsAndWalletsRoutes =
  (agents: AgentsService, wallets: AgentWalletsService): FastifyPluginAsyncTypebox =>
  async (app) => {
    app.post(
      "/api/agents/create",
      {
        validatorCompiler: documentedBodyOnly,
        schema: {
          ...tags("Agents"),
          summary: "Create an agent",
          body: AgentBody,
          response: { 201: Ok(AgentSchema) },
        },
      },
      async (request, reply) =>
        reply
          .status(201)
          .send({ success: true as const, data: await agents.create(requireKey(request), request.body) }),
    );
    app.get(
      "/api/agents/:agentId",
      {
        schema: {
          ...tags("Agents"),
          summary: "Read an agent",
          params: Type.Object({ agentId: Type.String() }),
          response: { 200: Ok(AgentSchema) },
        },
      },
      async (request) => ({
        success: true as const,
        data: await agents.get(requireKey(request), request.params.agentId),
      }),
    );
    app.get(
      "/api/agents",
      {
        schema: {
          ...tags("Agents"),
          summary: "List agents, newest first; search matches name or description (case-insensitive)",
          querystring: Type.Object({
            ...NumberedPage,
            search: Type.Optional(Type.String({ maxLength: 200 })),
          }),
          response: { 200: Ok(Page(AgentSchema)) },
        },
      },
      async (request) => ({
        success: true as const,
        data: await agents.list(requireKey(request), request.query),
      }),
    );
    app.patch(
      "/api/agents/:agentId",
      {
        validatorCompiler: documentedBodyOnly,
        schema: {
          ...tags("Agents"),
          summary: "Update an agent",
          params: Type.Object({ agentId: Type.String() }),
          body: Type.Partial(AgentBody),
          response: { 200: Ok(AgentSchema) },
        },
      },
      async (request) => ({
        success: true as const,
        data: await agents.update(requireKey(request), request.params.agentId, request.body),
      }),
    );
    app.delete(
      "/api/agents/:agentId",
      {
        schema: {
          ...tags("Agents"),
          summary: "Delete an agent",
          params: Type.Object({ agentId: Type.String() }),
          response: { 200: Ok(DeletedAgentSchema) },
        },
      },
      async (request) => ({
        success: true as const,
        data: await agents.remove(requireKey(request), request.params.agentId),
      }),
    );

    app.post(
      "/api/wallets/create",
      {
        validatorCompiler: documentedBodyOnly,
        schema: {
          ...tags("Wallets"),
          summary: "Create a wallet (a real key held by the service) for an agent or a user",
          body: Type.Object({
            ownerId: Type.String(),
            type: Type.Enum(WALLET_TYPES),
            currencies: Type.Array(Currency, { minItems: 1 }),
          }),
          response: { 201: Ok(WalletSchema) },
        },
      },
      async (request, reply) =>
        reply
          .status(201)
          .send({ success: true as const, data: await wallets.create(requireKey(request), request.body) }),
    );
    app.get(
      "/api/wallets/:walletId",
      {
        schema: {
          ...tags("Wallets"),
          summary: "Read a wallet with balances",
          params: Type.Object({ walletId: Type.String() }),
          response: { 200: Ok(WalletWithBalancesSchema) },
        },
      },
      async (request) => ({
        success: true as const,
        data: await wallets.get(requireKey(request), request.params.walletId),
      }),
    );
    app.get(
      "/api/wallets",
      {
        schema: {
          ...tags("Wallets"),
          summary: "List wallets with balances",
          querystring: Type.Object({
            ...NumberedPage,
            ownerId: Type.Optional(Type.String()),
            type: Type.Optional(Type.String()),
            currency: Type.Optional(Type.String()),
          }),
          response: { 200: Ok(Page(WalletWithBalancesSchema)) },
        },
      },
      async (request) => ({
        success: true as const,
        data: await wallets.list(requireKey(request), request.query),
      }),
    );
    app.get(
      "/api/wallets/:walletId/balance/:currency",
      {
        schema: {
          ...tags("Wallets"),
          summary: "Balance of one currency, on the network named (else the default one)",
          params: Type.Object({ walletId: Type.String(), currency: Type.String() }),
          querystring: Type.Object({ network: Type.Optional(Type.String()) }),
          response: { 200: Ok(WalletBalanceSchema) },
        },
      },
      async (request) => ({
        success: true as const,
        data: await wallets.balance(
          requireKey(request),
          request.params.walletId,
          request.params.currency,
          request.query,
        ),
      }),
    );
    app.post(
      "/api/wallets/:walletId/currencies",
      {
        validatorCompiler: documentedBodyOnly,
        schema: {
          ...tags("Wallets"),
          summary: "Add a currency to a wallet (no change if it has it)",
          params: Type.Object({ walletId: Type.String() }),
          body: Type.Object({ currency: Currency }),
          response: { 200: Ok(WalletWithBalancesSchema) },
        },
      },
      async (request) => ({
        success: true as const,
        data: await wallets.addCurrency(requireKey(request), request.params.walletId, request.body),
      }),
    );
  };
