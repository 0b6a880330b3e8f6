import type { AliasableExpression, Expression, Kysely } from "kysely";
import { jsonObjectFrom } from "kysely/helpers/postgres";
import type { DatabaseSchema } from "../../platform/db/schema.ts";

// The SQL of a workspace's checkout branding (D25, migration 043).

type Db = Kysely<DatabaseSchema>;

export interface Branding {
  name: string;
  displayName: string | null;
  brandColor: string | null;
  /** The logo's sha256 (hex), or null when there is none. */
  logoSha256: string | null;
}

/** One query for both readers below, so the columns and their names are written once. */
function brandingQuery(db: Db, workspaceId: string | Expression<string>) {
  return db
    .selectFrom("workspaces as w")
    .leftJoin("workspace_logos as l", "l.workspace_id", "w.id")
    .select([
      "w.name",
      "w.display_name as displayName",
      "w.brand_color as brandColor",
      "l.sha256 as logoSha256",
    ])
    .where("w.id", "=", workspaceId);
}

/** The workspace's branding in one statement, or undefined when there is no such workspace. */
export async function findBranding(db: Db, workspaceId: string): Promise<Branding | undefined> {
  return brandingQuery(db, workspaceId).executeTakeFirst();
}

/**
 * The same branding as an expression of a workspace id, for a reader that wants it inside its own
 * statement (the hosted page reads a payment and who it pays in one round trip); null when there
 * is no such workspace.
 */
export function brandingOf(db: Db, workspaceId: Expression<string>): AliasableExpression<Branding | null> {
  return jsonObjectFrom(brandingQuery(db, workspaceId));
}

/** Sets the columns given (undefined: unchanged); false when there is no such workspace. */
export async function updateIdentity(
  db: Db,
  workspaceId: string,
  values: { displayName?: string | null; brandColor?: string | null },
): Promise<boolean> {
  const set: { display_name?: string | null; brand_color?: string | null } = {};
  if (values.displayName !== undefined) set.display_name = values.displayName;
  if (values.brandColor !== undefined) set.brand_color = values.brandColor;
  const query =
    Object.keys(set).length === 0
      ? db.selectFrom("workspaces").select("id").where("id", "=", workspaceId)
      : db.updateTable("workspaces").set(set).where("id", "=", workspaceId).returning("id");
  return (await query.executeTakeFirst()) !== undefined;
}

export async function upsertLogo(
  db: Db,
  values: { workspaceId: string; contentType: string; bytes: Uint8Array; sha256: string; now: Date },
): Promise<void> {
  const row = {
    content_type: values.contentType,
    bytes: values.bytes,
    sha256: values.sha256,
    updated_at: values.now,
  };
  await db
    .insertInto("workspace_logos")
    .values({ workspace_id: values.workspaceId, ...row })
    .onConflict((oc) => oc.column("workspace_id").doUpdateSet(row))
    .execute();
}

/** Whether there was a logo to remove. */
export async function deleteLogo(db: Db, workspaceId: string): Promise<boolean> {
  const result = await db
    .deleteFrom("workspace_logos")
    .where("workspace_id", "=", workspaceId)
    .executeTakeFirst();
  return result.numDeletedRows > 0n;
}

/** A workspace's logo, or undefined when it has none. */
export async function findLogo(db: Db, workspaceId: string) {
  return db
    .selectFrom("workspace_logos")
    .select(["content_type", "bytes", "sha256"])
    .where("workspace_id", "=", workspaceId)
    .executeTakeFirst();
}
