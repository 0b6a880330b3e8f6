import type { Environment } from "../../config.ts";
import type { AppContext } from "../../context.ts";
import { badRequest, notFound } from "../../domain/errors.ts";
import { descriptionProblem, isPlainObject, isUuid } from "../../domain/validation.ts";
import type { Tenant } from "../../platform/http/auth.ts";
import { recordEvents } from "../webhooks/outbox.ts";
import type { AgentFields, AgentRow } from "./repo.ts";
import * as repo from "./repo.ts";

// Agent records (part 4.16, D8): per workspace and environment; every change writes its event
// (agent.created / agent.updated / agent.deleted) in the same transaction.

const MAX_METADATA_BYTES = 16 * 1024;

export interface AgentView {
  agentId: string;
  name: string;
  description: string | null;
  metadata: Record<string, unknown>;
  createdAt: string;
  updatedAt?: string;
}

function toView(row: AgentRow): AgentView {
  return {
    agentId: row.id,
    name: row.name,
    description: row.description,
    metadata: row.metadata,
    createdAt: row.created_at.toISOString(),
    ...(row.updated_at ? { updatedAt: row.updated_at.toISOString() } : {}),
  };
}

function validateFields(body: Record<string, unknown>, requireName: boolean): AgentFields {
  const out: AgentFields = {};
  if (body.name !== undefined || requireName) {
    if (typeof body.name !== "string" || body.name.trim().length === 0 || body.name.length > 200) {
      throw badRequest("name is required and must be 1 to 200 characters");
    }
    out.name = body.name.trim();
  }
  if (body.description !== undefined) {
    if (body.description !== null) {
      const problem = descriptionProblem(body.description);
      if (problem) throw badRequest(problem);
    }
    out.description = body.description as string | null;
  }
  if (body.metadata !== undefined) {
    if (!isPlainObject(body.metadata)) throw badRequest("metadata must be an object");
    if (JSON.stringify(body.metadata).length > MAX_METADATA_BYTES)
      throw badRequest("metadata must be at most 16 KiB of JSON");
    out.metadata = body.metadata;
  }
  return out;
}

export class AgentsService {
  readonly #ctx: AppContext;

  constructor(ctx: AppContext) {
    this.#ctx = ctx;
  }

  async create(principal: Tenant, body: unknown): Promise<AgentView> {
    if (!isPlainObject(body)) throw badRequest("Request body must be a JSON object");
    const fields = validateFields(body, true);
    return this.#ctx.db.transaction().execute(async (trx) => {
      const row = await repo.insertAgent(
        trx,
        principal,
        { ...fields, name: fields.name as string },
        this.#ctx.now(),
      );
      const view = toView(row);
      await recordEvents(trx, [{ ...scope(principal), type: "agent.created", payload: { ...view } }]);
      return view;
    });
  }

  async get(principal: Tenant, id: string): Promise<AgentView> {
    const row = await this.#find(this.#ctx.db, principal, id);
    if (!row) throw notFound("Agent not found");
    return toView(row);
  }

  /** An agent of the workspace and environment exists (wallet ownership check). */
  async exists(principal: Tenant, id: string): Promise<boolean> {
    return (await this.#find(this.#ctx.db, principal, id)) !== undefined;
  }

  async list(principal: Tenant, query: { page: number; limit: number; search?: string | undefined }) {
    const { rows, total } = await repo.listAgents(this.#ctx.db, principal, {
      search: query.search,
      limit: query.limit,
      offset: (query.page - 1) * query.limit,
    });
    return {
      items: rows.map(toView),
      pagination: { total, page: query.page, limit: query.limit, totalPages: Math.ceil(total / query.limit) },
    };
  }

  async update(principal: Tenant, id: string, body: unknown): Promise<AgentView> {
    if (!isPlainObject(body)) throw badRequest("Request body must be a JSON object");
    const fields = validateFields(body, false);
    const now = this.#ctx.now();
    return this.#ctx.db.transaction().execute(async (trx) => {
      const current = await this.#find(trx, principal, id, true);
      if (!current) throw notFound("Agent not found");
      const row = await repo.updateAgent(trx, current.id, fields, now);
      const view = toView(row);
      // Body of part 6: {event, data: {agentId, name, description, metadata, updatedAt}}.
      await recordEvents(trx, [
        {
          ...scope(principal),
          type: "agent.updated",
          payload: {
            agentId: view.agentId,
            name: view.name,
            description: view.description,
            metadata: view.metadata,
            updatedAt: view.updatedAt,
          },
        },
      ]);
      return view;
    });
  }

  async remove(principal: Tenant, id: string): Promise<{ agentId: string; deleted: true }> {
    const now = this.#ctx.now();
    return this.#ctx.db.transaction().execute(async (trx) => {
      const current = await this.#find(trx, principal, id, true);
      if (!current) throw notFound("Agent not found");
      await repo.markDeleted(trx, current.id, now);
      await recordEvents(trx, [
        {
          ...scope(principal),
          type: "agent.deleted",
          payload: { agentId: current.id, deletedAt: now.toISOString() },
        },
      ]);
      return { agentId: current.id, deleted: true as const };
    });
  }

  async #find(db: AppContext["db"], principal: Tenant, id: string, forUpdate = false) {
    return isUuid(id) ? repo.findAgent(db, principal, id, forUpdate) : undefined;
  }
}

function scope(principal: Tenant): { workspaceId: string; environment: Environment } {
  return { workspaceId: principal.workspaceId, environment: principal.environment };
}
