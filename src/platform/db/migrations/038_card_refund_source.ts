import { type Kysely, sql } from "kysely";

// A refund made in the card provider's own dashboard (issue 39): recorded on its payment when the
// provider's event reports it, as `source = 'provider'`; the service's own are 'service' (every
// row before this migration). Its provider id is unique already (022), so one refund at the
// provider is one row here, whoever saw it first.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE card_refunds ADD COLUMN source text NOT NULL DEFAULT 'service'
      CHECK (source IN ('service', 'provider'))`.execute(db);
}

export async function down(): Promise<void> {
  throw new Error("the card refund source migration is not reversible");
}
