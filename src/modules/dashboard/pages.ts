import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import type { AppContext } from "../../context.ts";
import { InvalidRequest } from "../../domain/errors.ts";
import { sendCsv } from "../../platform/http/csv.ts";
import { paymentsCsv } from "../payments/browse.ts";
import type { PaymentsService } from "../payments/service.ts";
import type { SettlementsService } from "../payments/settlements-service.ts";
import type { PayoutsService } from "../payouts/service.ts";
import type { WalletService } from "../payouts/wallet-service.ts";
import type { RefundsService } from "../refunds/service.ts";
import type { WebhooksService } from "../webhooks/service.ts";
import type { WorkspacesService } from "../workspaces/service.ts";
import { dailyPoints } from "./daily.ts";
import { readFilterForm } from "./filter-form.ts";
import { EnvIdParams, EnvParams, explorerOf, type PageKit, queryOf } from "./page-kit.ts";
import { overviewBody } from "./views/overview.ts";
import { paymentDetailBody, paymentsListBody } from "./views/payments.ts";

// The overview and the payments pages. Each reads and changes data through the owning module's
// service, for the environment its URL names: /dashboard/sandbox/… or /dashboard/live/….

export interface DashboardServices {
  workspaces: WorkspacesService;
  payments: PaymentsService;
  payouts: PayoutsService;
  wallet: WalletService;
  webhooks: WebhooksService;
  settlements: SettlementsService;
  refunds: RefundsService;
}

/** Payments per page of the list. */
const PAGE_SIZE = 25;

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

    app.get("/dashboard/:env/payments/:id", { schema: { params: EnvIdParams } }, async (request, reply) => {
      const tenant = kit.tenantOf(request, request.params.env);
      const payment = await services.payments.get(tenant, request.params.id);
      const [history, settled] = await Promise.all([
        services.webhooks.historyOf(tenant, payment.id),
        payment.paymentMethod === "crypto"
          ? services.settlements.list(tenant, { paymentId: payment.id, limit: 1, offset: 0 })
          : { settlements: [] },
      ]);
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
          }),
      );
    });

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
