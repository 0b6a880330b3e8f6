import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import type { FastifyReply, FastifyRequest } from "fastify";
import type { Environment } from "../../config.ts";
import type { AppContext } from "../../context.ts";
import { AppError, Conflict, RateLimited } from "../../domain/errors.ts";
import { statusOf } from "../../platform/http/error-handler.ts";
import { EnvIdParams, field, offsetOf, type PageKit } from "./page-kit.ts";
import { type PaymentPageServices, paymentPage } from "./pages.ts";
import {
  idempotencyKeyOf,
  MISSING_FORM_TOKEN,
  readRefundForm,
  refundBody,
  refusalMessage,
  refusedField,
  type UnmatchedAction,
} from "./refund-form.ts";
import { base } from "./views/layout.ts";
import { unmatchedPage, type WorkspacePageServices } from "./workspace-pages.ts";

// The forms of refunds and of the unmatched inbox (D19), post/redirect/get: a payment's refund
// form (RefundsService.create), and an open unmatched transfer's attach and keep (UnmatchedInbox) and
// return (RefundsService.returnTransfer). A payment or transfer the session's workspace does not
// own is the 404 page, before anything is asked; a refusal of the service shows the page again with
// its message next to the form, with the status the API gives it; a request that went through
// redirects to the page. The refund and the return send an Idempotency-Key derived from the
// form's one-time token, so a form sent twice refunds or returns once.

export type RefundPageServices = PaymentPageServices & Pick<WorkspacePageServices, "unmatched">;

/** The status of a refused form, with what goes with it (the API's, D10); server faults logged. */
function refusedWith(request: FastifyRequest, reply: FastifyReply, err: AppError): void {
  const status = statusOf(err.code);
  if (err instanceof RateLimited) reply.header("retry-after", String(err.retryAfterSeconds));
  if (status >= 500) request.log.error({ err }, "dashboard refund form failed");
  reply.status(status);
}

function text(body: unknown, name: string): string {
  return (field(body, name) ?? "").trim().slice(0, 200);
}

export const refundPages =
  (ctx: AppContext, services: RefundPageServices, kit: PageKit): FastifyPluginAsyncTypebox =>
  async (app) => {
    const showPayment = paymentPage(ctx, services, kit);
    const showUnmatched = unmatchedPage(ctx, services, kit);

    app.post(
      "/dashboard/:env/payments/:id/refunds",
      { schema: { params: EnvIdParams } },
      async (request, reply) => {
        const tenant = kit.tenantOf(request, request.params.env);
        const payment = await services.payments.get(tenant, request.params.id);
        const form = readRefundForm(request.body);
        const key = idempotencyKeyOf(request.body, "refund");
        if (!key) {
          reply.status(400);
          return showPayment(request, reply, tenant, payment.id, {
            ...form,
            error: { message: MISSING_FORM_TOKEN },
          });
        }
        let refundId: string;
        try {
          const answer = await services.refunds.create(
            tenant,
            payment.id,
            refundBody(form, payment.paymentMethod),
            key,
          );
          refundId = answer.refund.id;
        } catch (err) {
          if (!(err instanceof AppError)) throw err;
          refusedWith(request, reply, err);
          return showPayment(request, reply, tenant, payment.id, {
            ...form,
            error: { message: refusalMessage(err, payment.tokenSymbol), field: refusedField(err) },
          });
        }
        return reply.redirect(
          `${base(tenant.environment)}/payments/${payment.id}?refund=${encodeURIComponent(refundId)}#refunds`,
          303,
        );
      },
    );

    /** Back to the inbox's page the form was on, with the fixed message of what was done. */
    const done = (reply: FastifyReply, request: FastifyRequest, environment: Environment, what: string) => {
      const offset = offsetOf(request);
      const page = offset > 0 ? `offset=${offset}&` : "";
      return reply.redirect(`${base(environment)}/unmatched?${page}done=${what}`, 303);
    };

    app.post(
      "/dashboard/:env/unmatched/:id/attach",
      { schema: { params: EnvIdParams } },
      async (request, reply) => {
        const tenant = kit.tenantOf(request, request.params.env);
        const transfer = await services.unmatched.get(tenant, request.params.id);
        const paymentId = text(request.body, "paymentId");
        const refuse = (err: AppError) => {
          refusedWith(request, reply, err);
          return showUnmatched(request, reply, tenant, refusal(transfer.id, "attach", err, paymentId));
        };
        try {
          await services.unmatched.attach(tenant, transfer.id, { paymentId });
        } catch (err) {
          if (!(err instanceof AppError)) throw err;
          if (!(err instanceof Conflict)) return refuse(err);
          // The same form sent twice: the first one attached it to this very payment.
          const now = await services.unmatched.get(tenant, transfer.id);
          if (now.status !== "attached" || now.payment_id?.toLowerCase() !== paymentId.toLowerCase())
            return refuse(err);
        }
        return done(reply, request, tenant.environment, "attached");
      },
    );

    app.post(
      "/dashboard/:env/unmatched/:id/return",
      { schema: { params: EnvIdParams } },
      async (request, reply) => {
        const tenant = kit.tenantOf(request, request.params.env);
        const transfer = await services.unmatched.get(tenant, request.params.id);
        const destination = text(request.body, "destinationAddress");
        const key = idempotencyKeyOf(request.body, "return");
        if (!key) {
          reply.status(400);
          return showUnmatched(request, reply, tenant, {
            transferId: transfer.id,
            action: "return",
            message: MISSING_FORM_TOKEN,
            typed: destination,
          });
        }
        try {
          await services.refunds.returnTransfer(
            tenant,
            transfer.id,
            destination ? { destinationAddress: destination } : {},
            key,
          );
        } catch (err) {
          if (!(err instanceof AppError)) throw err;
          refusedWith(request, reply, err);
          return showUnmatched(
            request,
            reply,
            tenant,
            refusal(transfer.id, "return", err, destination, transfer.token_symbol),
          );
        }
        return done(reply, request, tenant.environment, "returned");
      },
    );

    app.post(
      "/dashboard/:env/unmatched/:id/keep",
      { schema: { params: EnvIdParams } },
      async (request, reply) => {
        const tenant = kit.tenantOf(request, request.params.env);
        const transfer = await services.unmatched.get(tenant, request.params.id);
        try {
          await services.unmatched.keep(tenant, transfer.id);
        } catch (err) {
          if (!(err instanceof AppError)) throw err;
          // The same form sent twice: the first one kept it.
          if (
            !(err instanceof Conflict) ||
            (await services.unmatched.get(tenant, transfer.id)).status !== "kept"
          ) {
            refusedWith(request, reply, err);
            return showUnmatched(request, reply, tenant, refusal(transfer.id, "keep", err, ""));
          }
        }
        return done(reply, request, tenant.environment, "kept");
      },
    );
  };

function refusal(transferId: string, action: UnmatchedAction, err: AppError, typed: string, token = "") {
  return { transferId, action, message: refusalMessage(err, token), typed };
}
