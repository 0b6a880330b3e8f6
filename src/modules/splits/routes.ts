import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "typebox";
import { MAX_LABEL, MAX_SPLITS, WHOLE_BPS } from "../../domain/splits.ts";
import { requireKey } from "../../platform/http/auth.ts";
import { documentedBodyOnly } from "../../platform/http/validation.ts";
import type { SplitsService } from "./service.ts";

// GET and PUT /api/v1/splits (D15), for the key's workspace and environment. The body schema only
// documents the shape: domain/splits.ts checks it, naming the field of the first problem.

const Address = Type.String({ pattern: "^0x[0-9a-fA-F]{40}$" });
const Bps = Type.Integer({
  minimum: 1,
  maximum: WHOLE_BPS,
  description: "Basis points of the net: 100 = 1%",
});
const Label = Type.String({ minLength: 1, maxLength: MAX_LABEL });

const SplitsAnswer = Type.Object({
  enabled: Type.Boolean(),
  splits: Type.Array(
    Type.Object({
      id: Type.String({ format: "uuid" }),
      label: Label,
      percentBps: Bps,
      destination: Address,
      enabled: Type.Boolean(),
      createdAt: Type.String({ format: "date-time" }),
    }),
  ),
});

export const splitsRoutes =
  (splits: SplitsService): FastifyPluginAsyncTypebox =>
  async (app) => {
    app.get(
      "/api/v1/splits",
      {
        schema: {
          tags: ["Splits"],
          summary: "Read the splits configuration of the key's environment",
          security: [{ apiKey: [] }],
          response: { 200: SplitsAnswer },
        },
      },
      async (request) => splits.get(requireKey(request)),
    );

    app.put(
      "/api/v1/splits",
      {
        validatorCompiler: documentedBodyOnly,
        schema: {
          tags: ["Splits"],
          summary: "Replace the splits configuration (applies to payments created from now on)",
          description: `At most ${MAX_SPLITS} splits, labels unique, the enabled ones summing to at most ${WHOLE_BPS} basis points. A split keeps its id while its label stays. 400 names the field of the first problem; nothing is changed then.`,
          security: [{ apiKey: [] }],
          body: Type.Object({
            enabled: Type.Boolean(),
            splits: Type.Array(
              Type.Object({
                label: Label,
                percentBps: Bps,
                destination: Address,
                enabled: Type.Optional(Type.Boolean({ default: true })),
              }),
              { maxItems: MAX_SPLITS },
            ),
          }),
          response: { 200: SplitsAnswer },
        },
      },
      async (request) => splits.put(requireKey(request), request.body),
    );
  };
