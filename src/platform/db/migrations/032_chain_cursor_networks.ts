import { type Kysely, sql } from "kysely";

// The chain watcher keeps a cursor per network (D22): the block it has processed up to on that
// chain, each network's own. A cursor kept before this is the one network its environment had:
// `default`. An instance of the version before writes its cursor by environment alone (ON
// CONFLICT (environment)), which this key no longer answers: stop those instances before the first
// of this version starts (docs/operations.md).
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE chain_cursors ADD COLUMN network text NOT NULL DEFAULT 'default'`.execute(db);
  await sql`ALTER TABLE chain_cursors ALTER COLUMN network DROP DEFAULT`.execute(db);
  await sql`ALTER TABLE chain_cursors DROP CONSTRAINT chain_cursors_pkey`.execute(db);
  await sql`ALTER TABLE chain_cursors ADD PRIMARY KEY (environment, network)`.execute(db);
}
