import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import type { FastifyReply, FastifyRequest } from "fastify";
import type { AppContext } from "../../context.ts";
import { InvalidRequest } from "../../domain/errors.ts";
import type { Tenant } from "../../platform/http/auth.ts";
import type { SettlementsService } from "../payments/settlement/settlements-service.ts";
import type { SplitsService } from "../splits/service.ts";
import type { Logins } from "./login.ts";
import { EnvParams, explorerOf, offsetOf, type PageKit, queryOf } from "./page-kit.ts";
import {
  enabledShare,
  formOf,
  readSplitsForm,
  refusalOf,
  type SplitsFormValues,
  toRequest,
} from "./split-form.ts";
import { stepUp } from "./step-up.ts";
import { html } from "./views/html.ts";
import { settlementsList, splitsForm } from "./views/splits.ts";

// The splits page under /dashboard/<env>/splits (D15): the environment's configuration, edited by
// a plain form that goes through SplitsService.put after the current password is given again
// (step-up, D21; all or nothing: a refused form changes
// nothing and comes back as typed, with the service's message next to the row it names), and the
// recent settlements with their legs, paged; `?payment=<id>` narrows them to one payment's.

export interface SplitPageServices {
  splits: SplitsService;
  settlements: SettlementsService;
  logins: Logins;
}

/** Settlements per page. */
const PAGE_SIZE = 20;

export const splitPages =
  (ctx: AppContext, services: SplitPageServices, kit: PageKit): FastifyPluginAsyncTypebox =>
  async (app) => {
    const show = async (
      request: FastifyRequest,
      reply: FastifyReply,
      tenant: Tenant,
      typed: SplitsFormValues | undefined,
      passwordError?: string,
    ) => {
      const query = queryOf(request);
      const offset = offsetOf(request);
      const rawPayment = query.payment;
      const paymentId =
        typeof rawPayment === "string" && rawPayment !== "" && rawPayment.length <= 64
          ? rawPayment
          : undefined;
      const [saved, page] = await Promise.all([
        services.splits.get(tenant),
        services.settlements.list(tenant, { paymentId, limit: PAGE_SIZE, offset }),
      ]);
      return kit.render(
        request,
        reply,
        tenant,
        { title: "Splits", section: "splits", path: "/splits" },
        (csrfToken) =>
          html`${splitsForm({
            environment: tenant.environment,
            csrfToken,
            form: typed ?? formOf(saved),
            passwordError,
            saved: { enabled: saved.enabled, share: enabledShare(saved.splits), count: saved.splits.length },
          })}
${settlementsList({
  environment: tenant.environment,
  page: { ...page, offset, limit: PAGE_SIZE, paymentId },
  explorer: explorerOf(ctx.config, tenant.environment),
})}`,
      );
    };

    app.get("/dashboard/:env/splits", { schema: { params: EnvParams } }, async (request, reply) =>
      show(request, reply, kit.tenantOf(request, request.params.env), undefined),
    );

    app.post("/dashboard/:env/splits", { schema: { params: EnvParams } }, async (request, reply) => {
      const tenant = kit.tenantOf(request, request.params.env);
      const form = readSplitsForm(request.body);
      // Splits send money elsewhere: saved only with the current password (step-up, D21).
      const refused = await stepUp(services.logins, request, reply);
      if (refused) {
        reply.status(refused.status);
        return show(request, reply, tenant, form, refused.message);
      }
      const sent = toRequest(form);
      if (!sent.ok) {
        reply.status(400);
        return show(request, reply, tenant, { ...form, error: sent.error });
      }
      try {
        await services.splits.put(tenant, sent.body);
      } catch (err) {
        if (!(err instanceof InvalidRequest)) throw err;
        reply.status(400);
        return show(request, reply, tenant, { ...form, error: refusalOf(err.message, sent.rowOf) });
      }
      return kit.done(reply, tenant.environment, "/splits", "splits-saved");
    });
  };
