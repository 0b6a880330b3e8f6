import { type Kysely, sql } from "kysely";

// One row holding a fixed text encrypted with the master key (src/bootstrap.ts). AES-GCM refuses
// to decrypt it under any other key, so an instance started with the wrong MASTER_KEY stops at
// start-up instead of writing secrets its peers cannot read. The boolean key allows one row only.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE master_key_check (
      id boolean PRIMARY KEY DEFAULT true CHECK (id),
      sealed text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now()
    )`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP TABLE master_key_check`.execute(db);
}
