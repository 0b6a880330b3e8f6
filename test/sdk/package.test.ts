import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "vitest";
import { openApiDocument } from "../../scripts/openapi-document.ts";
import { SDK_DOCUMENT, SDK_TYPES, sdkTypes } from "../../scripts/sdk-types.ts";

// The SDK package (sdk/): its document and types are what the service serves today (regenerated
// here, compared with what is committed), and it builds with its own tsc into an ESM package with
// declarations that a program can import.

const run = promisify(execFile);
const root = join(import.meta.dirname, "..", "..");
const outDirs: string[] = [];

afterAll(async () => {
  for (const dir of outDirs) await rm(dir, { recursive: true, force: true });
});

describe("the SDK package", () => {
  it("commits the service's document and the types generated from it, as they are today", async () => {
    const served = await openApiDocument();
    const committed = await readFile(SDK_DOCUMENT, "utf8");
    expect(committed === served, "sdk/openapi.json differs: run node scripts/openapi-document.ts").toBe(true);
    const types = await sdkTypes(served);
    const committedTypes = await readFile(SDK_TYPES, "utf8");
    expect(committedTypes === types, "sdk/src/schema.ts differs: run node scripts/sdk-types.ts").toBe(true);
  }, 60_000);

  it("builds with tsc into ESM with declarations, and the built module exports the client and the verifier", async () => {
    const outDir = await mkdtemp(join(tmpdir(), "sdk-build-"));
    outDirs.push(outDir);
    const tsc = createRequire(join(root, "sdk", "package.json")).resolve("typescript/bin/tsc");
    await run(process.execPath, [tsc, "-p", join(root, "sdk", "tsconfig.json"), "--outDir", outDir], {
      cwd: join(root, "sdk"),
    });
    const declarations = await readFile(join(outDir, "index.d.ts"), "utf8");
    expect(declarations).toContain("PaymentsClient");
    const built = await import(pathToFileURL(join(outDir, "index.js")).href);
    expect(typeof built.PaymentsClient).toBe("function");
    expect(typeof built.verifyWebhook).toBe("function");
    expect(() => new built.PaymentsClient({ apiKey: "", baseUrl: "http://127.0.0.1:1" })).toThrow(/apiKey/);
  }, 120_000);
});
