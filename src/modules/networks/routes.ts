import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "typebox";
import { ENVIRONMENTS } from "../../config.ts";
import { CHAIN_TOKENS } from "../../domain/money.ts";
import { requireKey } from "../../platform/http/auth.ts";
import { NullableString } from "../../platform/http/schemas.ts";
import type { NetworkDirectory } from "./directory.ts";

const NetworkView = Type.Object({
  id: Type.String({ examples: ["base"] }),
  caip2: Type.String({ examples: ["eip155:8453"] }),
  name: Type.String(),
  chainId: Type.Integer(),
  simulated: Type.Boolean({ description: "The sandbox's simulated ledger, not a chain" }),
  default: Type.Boolean({ description: "Where a request that names no network goes" }),
  tokens: Type.Array(
    Type.Object({
      symbol: Type.Enum(CHAIN_TOKENS),
      address: NullableString({ description: "null: the chain's native coin" }),
      decimals: Type.Integer(),
    }),
  ),
  confirmations: Type.Integer(),
  smartWallets: Type.Boolean(),
  swaps: Type.Boolean(),
});

export const networksRoutes =
  (directory: NetworkDirectory): FastifyPluginAsyncTypebox =>
  async (app) => {
    app.get(
      "/api/v1/networks",
      {
        schema: {
          tags: ["Networks"],
          summary: "The networks of the key's environment, the default first (D22)",
          security: [{ apiKey: [] }],
          response: {
            200: Type.Object({
              environment: Type.Enum(ENVIRONMENTS),
              default: NullableString(),
              networks: Type.Array(NetworkView),
            }),
          },
        },
      },
      async (request) => directory.list(requireKey(request).environment),
    );
  };

/** The `network` a request may name (D22), documented on every route that takes one. */
export const NetworkField = Type.Optional(
  Type.String({
    description: "A network id from GET /api/v1/networks; absent: the environment's default network",
    examples: ["default"],
  }),
);
