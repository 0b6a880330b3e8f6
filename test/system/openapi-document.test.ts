import { Validator } from "@seriousme/openapi-schema-validator";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { OPERATION_IDS } from "../../src/platform/http/operations.ts";
import { startTestApp, type TestApp } from "../support/app.ts";

// The OpenAPI document (/openapi.json) is what the typed SDK and any generated client are made
// from (issue 41): every operation must be named, tagged, secured and answer its errors with
// their body, give every success its schema, and the document must be valid OpenAPI 3.1 by a
// validator of its own.

interface Operation {
  operationId?: string;
  tags?: string[];
  security?: Array<Record<string, string[]>>;
  responses: Record<string, { content?: Record<string, { schema?: unknown }> }>;
}

let t: TestApp;
let doc: {
  paths: Record<string, Record<string, Operation>>;
  components: { securitySchemes: Record<string, unknown> };
};
let operations: Array<[string, Operation]>;

beforeAll(async () => {
  t = await startTestApp();
  doc = (await t.request({ method: "GET", url: "/openapi.json" })).json();
  operations = Object.entries(doc.paths).flatMap(([path, item]) =>
    Object.entries(item).map(([method, op]): [string, Operation] => [`${method.toUpperCase()} ${path}`, op]),
  );
}, 60_000);

afterAll(async () => {
  await t?.close();
});

/** The operations for which `check` answers a complaint, with it. */
function failing(check: (op: Operation, key: string) => string | null): string[] {
  return operations.flatMap(([key, op]) => {
    const complaint = check(op, key);
    return complaint ? [`${key}: ${complaint}`] : [];
  });
}

describe("the OpenAPI document", () => {
  it("is valid OpenAPI 3.1", async () => {
    const result = await new Validator().validate(structuredClone(doc));
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
  });

  it("names every operation once, and the table names no route that is gone", () => {
    expect(failing((op) => (op.operationId ? null : "no operationId"))).toEqual([]);
    const ids = operations.map(([, op]) => op.operationId);
    expect(ids.filter((id, i) => ids.indexOf(id) !== i)).toEqual([]);
    const documented = new Set(operations.map(([key]) => key));
    expect(Object.keys(OPERATION_IDS).filter((key) => !documented.has(key))).toEqual([]);
  });

  it("tags and secures every operation with a scheme the document defines", () => {
    expect(failing((op) => (op.tags?.length ? null : "no tags"))).toEqual([]);
    const schemes = new Set(Object.keys(doc.components.securitySchemes));
    expect(
      failing((op) => {
        if (!op.security?.length) return "no security";
        const unknown = op.security.flatMap(Object.keys).filter((s) => !schemes.has(s));
        return unknown.length ? `unknown scheme ${unknown.join(", ")}` : null;
      }),
    ).toEqual([]);
  });

  it("answers every operation's errors with the error body", () => {
    expect(
      failing((op) => {
        const missing = ["4XX", "5XX"].filter((c) => {
          const schema = op.responses[c]?.content?.["application/json"]?.schema as
            | { properties?: Record<string, unknown> }
            | undefined;
          return !schema?.properties?.error;
        });
        return missing.length ? `no error body for ${missing.join(", ")}` : null;
      }),
    ).toEqual([]);
  });

  it("gives every success answer its schema", () => {
    expect(
      failing((op) => {
        const success = Object.entries(op.responses).filter(([code]) => code.startsWith("2"));
        if (success.length === 0) return "no success response";
        const bare = success.filter(
          ([code, r]) => code !== "204" && !Object.values(r.content ?? {})[0]?.schema,
        );
        return bare.length ? `no schema for ${bare.map(([c]) => c).join(", ")}` : null;
      }),
    ).toEqual([]);
  });
});
