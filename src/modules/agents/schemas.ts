import { type TSchema, Type } from "typebox";
import { WALLET_CURRENCIES, WALLET_TYPES } from "../../domain/money.ts";
import { NullableString } from "../../platform/http/schemas.ts";

// Answers of /api/agents and /api/wallets (parts 4.16, 4.17) as the services make them
// (AgentsService, AgentWalletsService). A response schema also drives serialization: a field left
// out here would be dropped from the answer, so each shape lists every field its view has.

/** The agents and wallets family's envelope: `{success: true, data}`. */
export const Ok = <T extends TSchema>(data: T) => Type.Object({ success: Type.Literal(true), data });

/** `pagination` of the agents and wallets lists (part 8). */
export const Pagination = Type.Object({
  total: Type.Integer({ minimum: 0 }),
  page: Type.Integer({ minimum: 1 }),
  limit: Type.Integer({ minimum: 1 }),
  totalPages: Type.Integer({ minimum: 0 }),
});

/** A page of `item`s: `{items, pagination}`. */
export const Page = <T extends TSchema>(item: T) =>
  Type.Object({ items: Type.Array(item), pagination: Pagination });

export const AgentSchema = Type.Object(
  {
    agentId: Type.String({ format: "uuid" }),
    name: Type.String(),
    description: NullableString(),
    metadata: Type.Record(Type.String(), Type.Unknown(), { description: "Any JSON object, up to 16 KiB" }),
    createdAt: Type.String({ format: "date-time" }),
    updatedAt: Type.Optional(
      Type.String({ format: "date-time", description: "Present once it was updated" }),
    ),
  },
  { additionalProperties: true },
);

export const DeletedAgentSchema = Type.Object({
  agentId: Type.String({ format: "uuid" }),
  deleted: Type.Literal(true),
});

/** One of the currencies a wallet may hold. */
export const Currency = Type.Enum(WALLET_CURRENCIES);

const walletFields = {
  walletId: Type.String({ format: "uuid" }),
  address: Type.String({ description: "The wallet's own address (a key held by the service)" }),
  ownerId: Type.String({ description: "The agent's id (type agent) or the caller's user id (type user)" }),
  type: Type.Enum(WALLET_TYPES),
  currencies: Type.Array(Currency),
  createdAt: Type.String({ format: "date-time" }),
};

/** A wallet as created: no balances read yet. */
export const WalletSchema = Type.Object(walletFields, { additionalProperties: true });

/** Balances of one network, keyed by currency: decimal strings. */
const Balances = (description: string) =>
  Type.Record(Type.String(), Type.String(), { description: `${description}; e.g. {"USDC": "12.50"}` });

/** A wallet with its balances on each of the environment's networks (D22). */
export const WalletWithBalancesSchema = Type.Object(
  {
    ...walletFields,
    balances: Balances("Balances on the environment's default network, per currency the wallet holds"),
    networks: Type.Record(
      Type.String(),
      Balances("Balances on this network, per currency the wallet holds"),
      { description: "Balances on each of the environment's networks, keyed by network id" },
    ),
  },
  { additionalProperties: true },
);

export const WalletBalanceSchema = Type.Object({
  walletId: Type.String({ format: "uuid" }),
  currency: Currency,
  network: NullableString({ description: "The network read: the one asked for, else the default one" }),
  balance: Type.String({ description: "Decimal string in the currency's units", examples: ["12.50"] }),
  updatedAt: Type.String({ format: "date-time", description: "When it was read" }),
});
