import { describe, expect, it } from "vitest";
import { InvalidRequest } from "../../domain/errors.ts";
import { statusOf } from "./error-handler.ts";
import { isWellFormedText, MAX_JSON_DEPTH, parseJsonBody } from "./input-rules.ts";

function refusal(text: string): string {
  try {
    parseJsonBody(text);
  } catch (err) {
    expect(err).toBeInstanceOf(InvalidRequest);
    expect(statusOf((err as InvalidRequest).code)).toBe(400);
    return (err as InvalidRequest).message;
  }
  throw new Error(`expected ${text.slice(0, 80)} to be refused`);
}

describe("isWellFormedText", () => {
  it("refuses NUL and unpaired surrogates, keeps every other character", () => {
    for (const bad of ["\u0000", "a\u0000b", "\ud800", "a\udfffb", "\udc00\ud800"]) {
      expect(isWellFormedText(bad), JSON.stringify(bad)).toBe(false);
    }
    for (const good of ["", "plain", "💸", "\ud83d\udcb8", "\u202e\ufeff", "é\t\n"]) {
      expect(isWellFormedText(good), JSON.stringify(good)).toBe(true);
    }
  });
});

describe("parseJsonBody", () => {
  it("parses JSON; an empty body (or a BOM alone) is no body", () => {
    expect(parseJsonBody('{"a":[1,"b"]}')).toEqual({ a: [1, "b"] });
    expect(parseJsonBody("\ufeff{}")).toEqual({});
    expect(parseJsonBody("  ")).toBeUndefined();
  });

  it("answers malformed JSON with D10's message", () => {
    for (const text of ["{bad", "[1,", "not json", '{"a":1}}'])
      expect(refusal(text)).toBe("Invalid JSON body");
  });

  it("names the string that breaks the text rule by its path", () => {
    expect(refusal('{"description":"a\\u0000b"}')).toBe(
      "description must not contain NUL characters or unpaired UTF-16 surrogates",
    );
    expect(refusal('{"metadata":{"order":"\\ud800"}}')).toMatch(/^metadata\.order must not contain/);
    expect(refusal('{"metadata":{"\\udfff":"1"}}')).toMatch(/^metadata keys must not contain/);
    expect(refusal('{"currencies":["ETH","\\u0000"]}')).toMatch(/^currencies\[1\] must not contain/);
    expect(refusal('["\\ud800"]')).toMatch(/^body\[0\] must not contain/);
    expect(refusal('"\\u0000"')).toMatch(/^body must not contain/);
  });

  it("names keys that would poison a prototype", () => {
    expect(refusal('{"metadata":{"__proto__":"x"}}')).toBe("metadata must not have a key named __proto__");
    expect(refusal('{"\\u005f_proto__":{}}')).toBe("body must not have a key named __proto__");
    expect(refusal('{"a":{"constructor":{"prototype":{}}}}')).toBe(
      "a.constructor must not have a key named prototype",
    );
    expect(parseJsonBody('{"constructor":"x","toString":"y"}')).toEqual({ constructor: "x", toString: "y" });
  });

  it(`refuses nesting deeper than ${MAX_JSON_DEPTH} levels, without recursing`, () => {
    const nested = (levels: number) => `${"[".repeat(levels)}${"]".repeat(levels)}`;
    expect(parseJsonBody(nested(MAX_JSON_DEPTH))).toBeDefined();
    expect(refusal(nested(MAX_JSON_DEPTH + 1))).toMatch(/^body(\[0\])+ is nested too deeply/);
    expect(refusal(`{"k":${nested(400_000)}}`)).toMatch(/^k(\[0\])+ is nested too deeply/);
  });

  it("shortens a long key when it names it", () => {
    const key = "k".repeat(5000);
    expect(refusal(`{"${key}":"\\u0000"}`)).toBe(
      `${"k".repeat(40)}… must not contain NUL characters or unpaired UTF-16 surrogates`,
    );
  });
});
