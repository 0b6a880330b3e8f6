import { Migrator } from "kysely/migration";
import { type Db, MIGRATIONS } from "../../src/platform/db/database.ts";

// A database brought up to one migration, for tests of what a later migration does to the rows
// an earlier schema held (an upgrade).

/** A migrator of the project's migrations up to and including `upTo`. */
export function migratorUpTo(db: Db, upTo: string): Migrator {
  return new Migrator({
    db,
    provider: {
      getMigrations: async () =>
        Object.fromEntries(Object.entries(MIGRATIONS).filter(([name]) => name <= upTo)),
    },
  });
}

/** The last migration: `migratorUpTo(db, LATEST)` applies every one. */
export const LATEST = Object.keys(MIGRATIONS).sort().at(-1) ?? "";
