// Writes the service's OpenAPI document (what GET /openapi.json answers) to a file, for the SDK
// (sdk/openapi.json, from which sdk/src/schema.ts is generated): `node scripts/openapi-document.ts
// [file]`, by default sdk/openapi.json. The app is built as `npm start` builds it, on an in-memory
// database that is thrown away, with a fixed base URL so the document does not depend on where it
// was made. test/sdk/generated.test.ts fails when the committed files differ from what this makes.
import { randomBytes } from "node:crypto";
import { writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { buildApp } from "../src/app.ts";
import { loadConfig } from "../src/config.ts";
import { migrate, openDatabase } from "../src/platform/db/database.ts";
import { SecretBox } from "../src/platform/secrets/encryption.ts";

export const DOCUMENT_BASE_URL = "http://localhost:3000";

/** The document as the service serves it, serialized as the SDK commits it. */
export async function openApiDocument(): Promise<string> {
  const config = loadConfig({
    ADMIN_SECRET: randomBytes(24).toString("hex"),
    PUBLIC_BASE_URL: DOCUMENT_BASE_URL,
    LOG_LEVEL: "silent",
  });
  const database = await openDatabase({ databaseUrl: undefined, poolSize: 1 });
  try {
    await migrate(database.db);
    const app = await buildApp({
      config,
      db: database.db,
      secrets: new SecretBox(randomBytes(32)),
      now: () => new Date(),
      logger: false,
    });
    try {
      await app.http.ready();
      const res = await app.http.inject({ method: "GET", url: "/openapi.json" });
      if (res.statusCode !== 200) throw new Error(`GET /openapi.json answered ${res.statusCode}`);
      return `${JSON.stringify(res.json(), null, 2)}\n`;
    } finally {
      await app.http.close();
    }
  } finally {
    await database.close();
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const root = join(dirname(fileURLToPath(import.meta.url)), "..");
  const file = process.argv[2] ?? join(root, "sdk", "openapi.json");
  await writeFile(file, await openApiDocument());
  process.stderr.write(`wrote ${file}\n`);
}
