import { cpSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { migrate, openDatabase, pgliteDirFor } from "../../src/platform/db/database.ts";

// An embedded database migrated once per test file and copied into each test's DATA_DIR, for the
// suites that start the real process on a new folder in every test (the crash suites): a first
// start on an empty folder spends seconds creating and migrating the database, which is no part
// of what they prove. The copy has no master key file: the first process makes its own, as it
// would on an empty folder. Module state is per test file (vitest isolates files).

let template: Promise<string> | undefined;

function migratedTemplate(): Promise<string> {
  template ??= (async () => {
    const dir = mkdtempSync(join(tmpdir(), "migrated-template-"));
    const database = await openDatabase({ pgliteDir: pgliteDirFor(dir) });
    try {
      await migrate(database.db);
    } finally {
      await database.close();
    }
    return dir;
  })();
  return template;
}

/**
 * Starts making the template unless the suite runs on PostgreSQL (DATABASE_URL), so that it is made
 * beside the rest of a file's start-up (its devnet); settles when it is made.
 */
export async function prepareMigratedDatabase(): Promise<void> {
  if (process.env.DATABASE_URL === undefined) await migratedTemplate();
}

/** Puts a copy of the file's migrated, empty embedded database in `dataDir` (where the service looks). */
export async function copyMigratedDatabase(dataDir: string): Promise<void> {
  cpSync(pgliteDirFor(await migratedTemplate()), pgliteDirFor(dataDir), { recursive: true });
}

/** Removes the file's template (its afterAll). */
export async function removeMigratedTemplate(): Promise<void> {
  const made = template;
  template = undefined;
  // One that failed was reported where it was awaited.
  const dir = await made?.catch(() => undefined);
  if (dir) rmSync(dir, { recursive: true, force: true });
}
