import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import type { FastifyReply, FastifyRequest } from "fastify";
import type { AppContext } from "../../context.ts";
import { InvalidRequest } from "../../domain/errors.ts";
import type { Tenant } from "../../platform/http/auth.ts";
import { sendCsv } from "../../platform/http/csv.ts";
import { paymentsCsv } from "../payments/browse.ts";
import type { PaymentsService } from "../payments/service.ts";
import type { SettlementsService } from "../payments/settlement/settlements-service.ts";
import type { PayoutsService } from "../payouts/service.ts";
import type { WorkspaceWalletService } from "../payouts/workspace-wallet.ts";
import type { RefundsService } from "../refunds/service.ts";
import type { WebhooksService } from "../webhooks/service.ts";
import type { WorkspacesService } from "../workspaces/service.ts";
import { dailyPoints } from "./daily.ts";
import { readFilterForm } from "./filter-form.ts";
import { EnvIdParams, EnvParams, explorerOf, type PageKit, queryOf } from "./page-kit.ts";
import { blankRefundForm, type RefundFormValues } from "./refund-form.ts";
import { overviewBody } from "./views/overview.ts";
import { paymentDetailBody, paymentsListBody } from "./views/payments.ts";

// The overview and the payments pages. Each reads and changes data through the owning module's
// service, for the environment its URL names: /dashboard/sandbox/… or /dashboard/live/….

export interface DashboardServices {
  workspaces: WorkspacesService;
  payments: PaymentsService;
  payouts: PayoutsService;
  wallet: WorkspaceWalletService;
  webhooks: WebhooksService;
  settlements: SettlementsService;
  refunds: RefundsService;
}

/** Payments per page of the list. */
const PAGE_SIZE = 25;
/** Refunds shown on a payment's page (oldest first). */
const REFUNDS_SHOWN = 50;

export type PaymentPageServices = Pick<
  DashboardServices,
  "payments" | "webhooks" | "settlements" | "refunds"
>;

/**
 * A payment's page: its facts, transactions, refunds (with the refund form, blank or as typed
 * after a refusal), settlement and history. Also shown by the refund form's POST (refund-pages.ts).
 */
export const paymentPage =
  (ctx: AppContext, services: PaymentPageServices, kit: PageKit) =>
  async (
    request: FastifyRequest,
    reply: FastifyReply,
    tenant: Tenant,
    id: string,
    typed?: RefundFormValues,
  ): Promise<FastifyReply> => {
    const payment = await services.payments.get(tenant, id);
    // Only a forwarded payment is refunded (D19): no other has refunds to list.
    const refundable = payment.status === "forwarded";
    const [history, settled, refunds] = await Promise.all([
      services.webhooks.historyOf(tenant, payment.id),
      payment.paymentMethod === "crypto"
        ? services.settlements.list(tenant, { paymentId: payment.id, limit: 1, offset: 0 })
        : { settlements: [] },
      refundable ? services.refunds.list(tenant, payment.id, { limit: REFUNDS_SHOWN, offset: 0 }) : null,
    ]);
    const made = queryOf(request).refund;
    return kit.render(
      request,
      reply,
      tenant,
      { title: "Payment", section: "payments", path: `/payments/${payment.id}` },
      (csrfToken) =>
        paymentDetailBody({
          environment: tenant.environment,
          payment,
          history,
          explorer: explorerOf(ctx.config, tenant.environment),
          csrfToken,
          settlement: settled.settlements[0] ?? null,
          refunds: refunds
            ? {
                refunds: refunds.refunds,
                total: refunds.total,
                form: typed ?? blankRefundForm(),
                made: typeof made === "string" ? made : undefined,
              }
            : undefined,
        }),
    );
  };

export const pageRoutes =
  (ctx: AppContext, services: DashboardServices, kit: PageKit): FastifyPluginAsyncTypebox =>
  async (app) => {
    app.get("/dashboard/:env", { schema: { params: EnvParams } }, async (request, reply) => {
      const tenant = kit.tenantOf(request, request.params.env);
      const [balances, stats, payoutState, recent, daily] = await Promise.all([
        services.wallet.balances(tenant),
        services.wallet.stats(tenant),
        services.payouts.state(tenant),
        // A keyset page: no count of every payment, which the offset list would add.
        services.payments.browse(tenant, {}, { limit: 10 }),
        dailyPoints(services.payments, tenant, ctx.now()),
      ]);
      return kit.render(
        request,
        reply,
        tenant,
        { title: "Overview", section: "overview", path: "" },
        (csrfToken) =>
          overviewBody({
            environment: tenant.environment,
            csrfToken,
            balances,
            stats,
            payoutState: { ...payoutState, reason: payoutState.reason ?? null },
            daily,
            recent: recent.payments,
          }),
      );
    });

    app.get("/dashboard/:env/payments", { schema: { params: EnvParams } }, async (request, reply) => {
      const tenant = kit.tenantOf(request, request.params.env);
      const query = queryOf(request);
      const form = readFilterForm(query);
      const after = typeof query.after === "string" && query.after !== "" ? query.after : undefined;
      const result = form.ok
        ? await services.payments.browse(tenant, form.filter, {
            limit: PAGE_SIZE,
            ...(after ? { after } : {}),
          })
        : { payments: [], next: null };
      if (!form.ok) reply.status(400);
      return kit.render(
        request,
        reply,
        tenant,
        { title: "Payments", section: "payments", path: "/payments" },
        () =>
          paymentsListBody({
            environment: tenant.environment,
            payments: result.payments,
            networks: ctx.directory.list(tenant.environment).networks.map((network) => network.id),
            filter: form.values,
            query: form.ok ? form.query : "",
            next: result.next,
            error: form.ok ? undefined : form.error,
          }),
      );
    });

    app.get(
      "/dashboard/:env/payments/export.csv",
      { schema: { params: EnvParams } },
      async (request, reply) => {
        const tenant = kit.tenantOf(request, request.params.env);
        const form = readFilterForm(queryOf(request));
        if (!form.ok) throw new InvalidRequest(`${form.error.field}: ${form.error.message}`);
        const rows = services.payments.exportPayments(tenant, form.filter);
        return sendCsv(reply, `payments-${tenant.environment}.csv`, paymentsCsv(rows));
      },
    );

    const showPayment = paymentPage(ctx, services, kit);
    app.get("/dashboard/:env/payments/:id", { schema: { params: EnvIdParams } }, async (request, reply) =>
      showPayment(request, reply, kit.tenantOf(request, request.params.env), request.params.id),
    );

    app.post(
      "/dashboard/:env/payments/:id/cancel",
      { schema: { params: EnvIdParams } },
      async (request, reply) => {
        const tenant = kit.tenantOf(request, request.params.env);
        const payment = await services.payments.cancel(tenant, request.params.id);
        return kit.done(reply, tenant.environment, `/payments/${payment.id}`, "cancelled");
      },
    );

    app.post("/dashboard/:env/payouts/resume", { schema: { params: EnvParams } }, async (request, reply) => {
      const tenant = kit.tenantOf(request, request.params.env);
      const outcome = await services.payouts.resumePayouts(tenant);
      return kit.done(reply, tenant.environment, "", outcome.resumed ? "resumed" : "not-paused");
    });
  };
