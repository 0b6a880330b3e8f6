import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import type { FastifyReply, FastifyRequest } from "fastify";
import { Type } from "typebox";
import { InternalError, InvalidRequest } from "../../domain/errors.ts";
import { WALLET_CURRENCIES } from "../../domain/money.ts";
import type { Tenant } from "../../platform/http/auth.ts";
import type { AgentPaymentsService } from "../wallets/agent-payments.ts";
import type { AgentWalletsService } from "../wallets/service.ts";
import type { Logins } from "./login.ts";
import { EnvIdParams, EnvParams, field, type PageKit } from "./page-kit.ts";
import { stepUp } from "./step-up.ts";
import {
  type AgentWalletCard,
  AMOUNT_FIELDS,
  agentWalletsBody,
  approvalsBody,
  approvedBody,
  LIST_FIELDS,
  type PolicyForm,
  policyForm,
} from "./views/agents.ts";

// Agent wallets on the dashboard (D23, issue 40): /dashboard/<env>/agents shows each agent wallet
// with its spending policy and the form that replaces it; /dashboard/<env>/approvals lists the
// payments waiting for approval with Approve and Deny. Each change asks for the current password
// (step-up, D21) and goes through AgentPaymentsService for the session's tenant, so another
// workspace's or environment's wallet or authorization is a 404.

/** Wallets and waiting payments a page shows (the newest; the page says when there are more). */
const PAGE_SIZE = 100;

const AuthorizationParams = Type.Object({
  env: Type.String({ maxLength: 16 }),
  walletId: Type.String({ maxLength: 64 }),
  authorizationId: Type.String({ maxLength: 64 }),
});

export interface AgentPageServices {
  agentWallets: AgentWalletsService;
  agentPayments: AgentPaymentsService;
  logins: Logins;
}

export const agentPages =
  (services: AgentPageServices, kit: PageKit): FastifyPluginAsyncTypebox =>
  async (app) => {
    const { agentWallets, agentPayments } = services;

    /** The agent wallets with their policies; `typed` replaces one wallet's form (a refused save). */
    const showWallets = async (
      request: FastifyRequest,
      reply: FastifyReply,
      tenant: Tenant,
      typed?: { walletId: string; form: PolicyForm },
    ) => {
      const page = await agentWallets.summaries(tenant, { page: 1, limit: PAGE_SIZE, type: "agent" });
      const wallets: AgentWalletCard[] = await Promise.all(
        page.items.map(async (w) => ({
          ...w,
          form:
            typed?.walletId === w.walletId
              ? typed.form
              : policyForm(await agentPayments.policy(tenant, w.walletId)),
        })),
      );
      return kit.render(
        request,
        reply,
        tenant,
        { title: "Agent wallets", section: "agents", path: "/agents" },
        (csrfToken) =>
          agentWalletsBody({ environment: tenant.environment, csrfToken, wallets, total: page.total }),
      );
    };

    /** The waiting payments; `refused` puts the step-up's message next to one row's buttons. */
    const showApprovals = async (
      request: FastifyRequest,
      reply: FastifyReply,
      tenant: Tenant,
      refused?: { authorizationId: string; message: string },
    ) => {
      const [waiting, wallets] = await Promise.all([
        agentPayments.waiting(tenant, { page: 1, limit: PAGE_SIZE }),
        agentWallets.summaries(tenant, { page: 1, limit: PAGE_SIZE, type: "agent" }),
      ]);
      const byId = new Map(wallets.items.map((w) => [w.walletId, w]));
      const rows = waiting.items.map((authorization) => ({
        authorization,
        wallet: byId.get(authorization.walletId),
        error: refused?.authorizationId === authorization.authorizationId ? refused.message : undefined,
      }));
      return kit.render(
        request,
        reply,
        tenant,
        { title: "Approvals", section: "approvals", path: "/approvals" },
        (csrfToken) =>
          approvalsBody({ environment: tenant.environment, csrfToken, rows, total: waiting.total }),
      );
    };

    app.get("/dashboard/:env/agents", { schema: { params: EnvParams } }, async (request, reply) =>
      showWallets(request, reply, kit.tenantOf(request, request.params.env)),
    );

    app.post(
      "/dashboard/:env/agents/:id/policy",
      { schema: { params: EnvIdParams } },
      async (request, reply) => {
        const tenant = kit.tenantOf(request, request.params.env);
        const walletId = request.params.id;
        const form = formOf(request.body);
        // A policy decides what an agent may spend: changed only with the current password (D21).
        const refused = await stepUp(services.logins, request, reply);
        if (refused) {
          reply.status(refused.status);
          return showWallets(request, reply, tenant, { walletId, form: { ...form, error: refused.message } });
        }
        try {
          await agentPayments.setPolicy(tenant, walletId, bodyOf(form));
        } catch (err) {
          if (!(err instanceof InvalidRequest)) throw err;
          reply.status(400);
          return showWallets(request, reply, tenant, { walletId, form: { ...form, error: err.message } });
        }
        return kit.done(reply, tenant.environment, "/agents", "policy-saved");
      },
    );

    app.get("/dashboard/:env/approvals", { schema: { params: EnvParams } }, async (request, reply) =>
      showApprovals(request, reply, kit.tenantOf(request, request.params.env)),
    );

    /**
     * A decision on a waiting payment: the current password first (step-up, D21; refused: the queue
     * again with why), then `decide` for the session's tenant.
     */
    const decision =
      (
        decide: (
          request: FastifyRequest,
          reply: FastifyReply,
          tenant: Tenant,
          ids: { walletId: string; authorizationId: string },
        ) => Promise<unknown>,
      ) =>
      async (
        request: FastifyRequest<{ Params: { env: string; walletId: string; authorizationId: string } }>,
        reply: FastifyReply,
      ) => {
        const tenant = kit.tenantOf(request, request.params.env);
        const { walletId, authorizationId } = request.params;
        const refused = await stepUp(services.logins, request, reply);
        if (refused) {
          reply.status(refused.status);
          return showApprovals(request, reply, tenant, { authorizationId, message: refused.message });
        }
        return decide(request, reply, tenant, { walletId, authorizationId });
      };

    app.post(
      "/dashboard/:env/approvals/:walletId/:authorizationId/approve",
      { schema: { params: AuthorizationParams } },
      decision(async (request, reply, tenant, { walletId, authorizationId }) => {
        const answer = await agentPayments.approve(tenant, walletId, authorizationId);
        // approve answers an authorized payment or throws (404, 409): anything else is our bug.
        if (answer.status !== "authorized") throw new InternalError("an approval answered no signature");
        const authorization = await agentPayments.authorization(tenant, walletId, authorizationId);
        return kit.render(
          request,
          reply,
          tenant,
          { title: "Payment approved", section: "approvals", path: "/approvals" },
          () =>
            approvedBody({
              environment: tenant.environment,
              authorization,
              paymentSignature: answer.paymentSignature,
              expiresAt: answer.expiresAt,
            }),
        );
      }),
    );

    app.post(
      "/dashboard/:env/approvals/:walletId/:authorizationId/deny",
      { schema: { params: AuthorizationParams } },
      decision(async (_request, reply, tenant, { walletId, authorizationId }) => {
        await agentPayments.deny(tenant, walletId, authorizationId);
        return kit.done(reply, tenant.environment, "/approvals", "payment-denied");
      }),
    );
  };

/** The policy form as typed. */
function formOf(body: unknown): PolicyForm {
  const amounts = (f: string) =>
    Object.fromEntries(WALLET_CURRENCIES.map((c) => [c, (field(body, `${f}-${c}`) ?? "").trim()]));
  const list = (f: string) => (field(body, `${f}-on`) === undefined ? null : (field(body, f) ?? "").trim());
  return {
    amounts: {
      maxPerPayment: amounts("maxPerPayment"),
      daily: amounts("daily"),
      monthly: amounts("monthly"),
      approvalAbove: amounts("approvalAbove"),
    },
    lists: { allowedPayees: list("allowedPayees"), allowedOrigins: list("allowedOrigins") },
  };
}

/** The form as the policy body AgentPaymentsService.setPolicy takes (it checks every field). */
function bodyOf(form: PolicyForm): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  for (const [f] of AMOUNT_FIELDS) {
    const given = Object.entries(form.amounts[f]).filter(([, text]) => text !== "");
    if (given.length > 0) body[f] = Object.fromEntries(given);
  }
  for (const [f] of LIST_FIELDS) {
    const text = form.lists[f];
    if (text !== null) body[f] = text.split(/[\s,]+/).filter((item) => item !== "");
  }
  return body;
}
