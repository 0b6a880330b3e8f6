import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import type { AppContext } from "../../context.ts";
import { sendCsv } from "../../platform/http/csv.ts";
import { parsePayoutFilter, payoutsCsv } from "../payouts/browse.ts";
import type { PayoutsService } from "../payouts/service.ts";
import { EnvIdParams, EnvParams, explorerOf, type PageKit, queryOf } from "./page-kit.ts";
import { payoutDetailBody, payoutsListBody } from "./views/payouts.ts";

// The payouts pages: the breaker with Resume Payouts, the list (every status, keyset pages), a
// payout's page, and the CSV of the list's filter.

const PAGE_SIZE = 25;

export const payoutPages =
  (ctx: AppContext, services: { payouts: PayoutsService }, kit: PageKit): FastifyPluginAsyncTypebox =>
  async (app) => {
    app.get("/dashboard/:env/payouts", { schema: { params: EnvParams } }, async (request, reply) => {
      const tenant = kit.tenantOf(request, request.params.env);
      const query = queryOf(request);
      const filter = parsePayoutFilter(query);
      const after = typeof query.after === "string" && query.after !== "" ? query.after : undefined;
      const [page, breaker] = await Promise.all([
        services.payouts.browse(tenant, filter, { after, limit: PAGE_SIZE }),
        services.payouts.state(tenant),
      ]);
      return kit.render(
        request,
        reply,
        tenant,
        { title: "Payouts", section: "payouts", path: "/payouts" },
        (csrfToken) =>
          payoutsListBody({
            environment: tenant.environment,
            payouts: page.payouts,
            status: filter.status,
            network: filter.network,
            networks: ctx.directory.list(tenant.environment).networks.map((network) => network.id),
            next: page.next,
            breaker: { ...breaker, reason: breaker.reason ?? null },
            csrfToken,
          }),
      );
    });

    app.get(
      "/dashboard/:env/payouts/export.csv",
      { schema: { params: EnvParams } },
      async (request, reply) => {
        const tenant = kit.tenantOf(request, request.params.env);
        const filter = parsePayoutFilter(queryOf(request));
        return sendCsv(
          reply,
          `payouts-${tenant.environment}.csv`,
          payoutsCsv(services.payouts.exportPayouts(tenant, filter)),
        );
      },
    );

    app.get("/dashboard/:env/payouts/:id", { schema: { params: EnvIdParams } }, async (request, reply) => {
      const tenant = kit.tenantOf(request, request.params.env);
      const payout = await services.payouts.get(tenant, request.params.id);
      return kit.render(
        request,
        reply,
        tenant,
        { title: "Payout", section: "payouts", path: `/payouts/${payout.id}` },
        () =>
          payoutDetailBody(
            tenant.environment,
            payout,
            explorerOf(ctx.config, tenant.environment, payout.network),
          ),
      );
    });
  };
