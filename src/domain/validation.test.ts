import { describe, expect, it } from "vitest";
import {
  ADDRESS_PATTERN,
  descriptionProblem,
  httpUrlProblem,
  isAddress,
  isPlainObject,
  isUuid,
  MAX_AMOUNT_UNITS,
  MAX_DESCRIPTION,
  MAX_METADATA_KEY,
  MAX_METADATA_KEYS,
  MAX_METADATA_VALUE,
  MAX_URL,
  metadataProblem,
  parseAmountField,
} from "./validation.ts";

const HEX40 = "0123456789abcdef0123456789abcdef01234567";

describe("limits (D10)", () => {
  it("uses the decided limits", () => {
    expect(MAX_METADATA_KEYS).toBe(50);
    expect(MAX_METADATA_KEY).toBe(40);
    expect(MAX_METADATA_VALUE).toBe(500);
    expect(MAX_DESCRIPTION).toBe(1000);
    expect(MAX_URL).toBe(2048);
  });
});

describe("isUuid", () => {
  it("accepts UUIDs in either case and nothing else", () => {
    expect(isUuid("5cd6d67c-e173-44e5-b4b7-06bd88c57066")).toBe(true);
    expect(isUuid("5CD6D67C-E173-44E5-B4B7-06BD88C57066")).toBe(true);
    for (const value of [
      "-".repeat(36),
      "5cd6d67c-e173-44e5-b4b7-06bd88c5706",
      "5cd6d67ce17344e5b4b706bd88c57066xxxx",
      "",
      42,
      null,
    ]) {
      expect(isUuid(value), String(value)).toBe(false);
    }
  });
});

describe("isAddress", () => {
  it.each([
    `0x${HEX40}`,
    `0x${HEX40.toUpperCase()}`,
    "0xAbCdEf0123456789aBcDeF0123456789AbCdEf01",
    `0x${"0".repeat(40)}`,
  ])("accepts %s", (value) => {
    expect(isAddress(value)).toBe(true);
    expect(ADDRESS_PATTERN.test(value)).toBe(true);
  });

  it.each([
    ["empty string", ""],
    ["prefix only", "0x"],
    ["39 hex chars", `0x${HEX40.slice(1)}`],
    ["41 hex chars", `0x${HEX40}a`],
    ["no prefix", HEX40],
    ["no prefix, 42 hex chars", `00${HEX40}`],
    ["uppercase X prefix", `0X${HEX40}`],
    ["non-hex character", `0x${HEX40.slice(1)}g`],
    ["leading space", ` 0x${HEX40}`],
    ["trailing space", `0x${HEX40} `],
    ["trailing newline", `0x${HEX40}\n`],
    ["leading newline", `\n0x${HEX40}`],
    ["embedded in other text", `address 0x${HEX40}`],
    ["ENS name", "vitalik.eth"],
  ])("rejects %s", (_label, value) => {
    expect(isAddress(value)).toBe(false);
  });

  it("rejects non-strings", () => {
    for (const value of [
      undefined,
      null,
      0,
      123n,
      true,
      {},
      [`0x${HEX40}`],
      { toString: () => `0x${HEX40}` },
    ]) {
      expect(isAddress(value)).toBe(false);
    }
  });
});

describe("isPlainObject", () => {
  it("accepts objects", () => {
    expect(isPlainObject({})).toBe(true);
    expect(isPlainObject({ a: 1 })).toBe(true);
    expect(isPlainObject(Object.create(null))).toBe(true);
  });

  it("rejects null, arrays and primitives", () => {
    for (const value of [null, undefined, [], [1], "x", "", 0, 1, true, 1n]) {
      expect(isPlainObject(value)).toBe(false);
    }
  });
});

describe("metadataProblem", () => {
  const keys = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, "v"]));

  it("accepts an empty object", () => {
    expect(metadataProblem({})).toBeNull();
  });

  it("accepts string values, including empty strings", () => {
    expect(metadataProblem({ orderId: "1234", note: "" })).toBeNull();
  });

  it("accepts exactly 50 keys and rejects 51", () => {
    expect(metadataProblem(keys(50))).toBeNull();
    expect(metadataProblem(keys(51))).toBe("metadata can have at most 50 keys");
  });

  it("accepts a 40-character key and rejects a 41-character key", () => {
    expect(metadataProblem({ ["k".repeat(40)]: "v" })).toBeNull();
    const long = "k".repeat(41);
    expect(metadataProblem({ [long]: "v" })).toBe(
      `metadata keys must be 1 to 40 characters (key "${"k".repeat(40)}…")`,
    );
  });

  it("rejects an empty key", () => {
    expect(metadataProblem({ "": "v" })).toBe('metadata keys must be 1 to 40 characters (key "…")');
  });

  it("accepts a 500-character value and rejects a 501-character value naming the key", () => {
    expect(metadataProblem({ note: "x".repeat(500) })).toBeNull();
    expect(metadataProblem({ note: "x".repeat(501) })).toBe(
      "metadata.note must be a string of at most 500 characters",
    );
  });

  it.each([
    ["a number", 1],
    ["zero", 0],
    ["a boolean", true],
    ["null", null],
    ["undefined", undefined],
    ["an array", ["a"]],
    ["an empty array", []],
    ["a nested object", { a: "b" }],
  ])("rejects %s as a value, naming the key", (_label, value) => {
    expect(metadataProblem({ ok: "fine", bad: value })).toBe(
      "metadata.bad must be a string of at most 500 characters",
    );
  });

  it("reports the first bad entry in key order", () => {
    expect(metadataProblem({ first: 1, second: 2 })).toBe(
      "metadata.first must be a string of at most 500 characters",
    );
  });

  it("checks the key count before the entries", () => {
    const tooMany = { ...keys(50), bad: 1 };
    expect(metadataProblem(tooMany)).toBe("metadata can have at most 50 keys");
  });

  it.each([
    ["null", null],
    ["undefined", undefined],
    ["an array", []],
    ["an array of strings", ["a", "b"]],
    ["a string", "orderId=1"],
    ["a number", 42],
    ["a boolean", false],
  ])("rejects %s as metadata", (_label, value) => {
    expect(metadataProblem(value)).toBe("metadata must be an object");
  });

  it("counts keys coming from JSON such as __proto__ as ordinary keys", () => {
    const parsed = JSON.parse('{"__proto__": 1}');
    expect(metadataProblem(parsed)).toBe("metadata.__proto__ must be a string of at most 500 characters");
  });
});

describe("descriptionProblem", () => {
  const message = "description must be a string of at most 1000 characters";

  it("accepts strings up to 1000 characters", () => {
    expect(descriptionProblem("")).toBeNull();
    expect(descriptionProblem("Order #1234")).toBeNull();
    expect(descriptionProblem("d".repeat(1000))).toBeNull();
  });

  it("rejects 1001 characters", () => {
    expect(descriptionProblem("d".repeat(1001))).toBe(message);
  });

  it("rejects non-strings", () => {
    for (const value of [undefined, null, 1, true, {}, ["a"]]) {
      expect(descriptionProblem(value)).toBe(message);
    }
  });
});

describe("httpUrlProblem", () => {
  const message = (field: string) => `${field} must be an http(s) URL of at most 2048 characters`;

  it.each([
    "http://example.com",
    "https://example.com",
    "https://shop.example.com/thanks?order=1#top",
    "https://localhost:3000/return",
    "http://127.0.0.1/x",
    "HTTPS://EXAMPLE.COM/",
  ])("accepts %s", (value) => {
    expect(httpUrlProblem("returnUrl", value)).toBeNull();
  });

  it.each([
    "javascript:alert(1)",
    "JavaScript:alert(document.cookie)",
    "data:text/html,<script>alert(1)</script>",
    "ftp://example.com/file",
    "file:///etc/passwd",
    "mailto:someone@example.com",
    "vbscript:msgbox(1)",
    "blob:https://example.com/uuid",
    "/relative/path",
    "example.com",
    "//example.com/path",
    "https://",
    "http://",
    "",
    "not a url",
  ])("rejects %j", (value) => {
    expect(httpUrlProblem("returnUrl", value)).toBe(message("returnUrl"));
  });

  it("names the field it is given", () => {
    expect(httpUrlProblem("cancelUrl", "javascript:alert(1)")).toBe(message("cancelUrl"));
    expect(httpUrlProblem("metadata.successUrl", "data:,x")).toBe(message("metadata.successUrl"));
  });

  it("accepts a 2048-character URL and rejects 2049", () => {
    const prefix = "https://example.com/";
    const exact = prefix + "a".repeat(2048 - prefix.length);
    expect(exact).toHaveLength(2048);
    expect(httpUrlProblem("returnUrl", exact)).toBeNull();
    expect(httpUrlProblem("returnUrl", `${exact}a`)).toBe(message("returnUrl"));
  });

  it("rejects non-strings", () => {
    for (const value of [
      undefined,
      null,
      1,
      true,
      {},
      ["https://example.com"],
      new URL("https://example.com"),
    ]) {
      expect(httpUrlProblem("returnUrl", value)).toBe(message("returnUrl"));
    }
  });
});

describe("parseAmountField (one rule for every amount, issue 20)", () => {
  it("is bounded by what a uint256 transfer carries", () => {
    expect(MAX_AMOUNT_UNITS).toBe(2n ** 256n - 1n);
    expect(parseAmountField(MAX_AMOUNT_UNITS.toString(), 0)).toBe(MAX_AMOUNT_UNITS);
    expect(parseAmountField((MAX_AMOUNT_UNITS + 1n).toString(), 0)).toBeNull();
    expect(parseAmountField("1".repeat(72), 6)).toBe(BigInt("1".repeat(72)) * 10n ** 6n);
    expect(parseAmountField("1".repeat(73), 6)).toBeNull();
  });

  it("keeps D4's grammar: leading zeros are still an amount, anything else is not", () => {
    expect(parseAmountField(`${"0".repeat(500)}1.5`, 6)).toBe(1_500_000n);
    expect(parseAmountField("0".repeat(500), 6)).toBeNull();
    for (const input of ["1e3", "-1", " 1", "0x10", "", 5, null, "1.0000001"]) {
      expect(parseAmountField(input, 6), String(input)).toBeNull();
    }
  });

  it("refuses a 1 MiB digit string without parsing it", () => {
    const started = performance.now();
    expect(parseAmountField("9".repeat(1024 * 1024), 18)).toBeNull();
    expect(performance.now() - started).toBeLessThan(200);
  });
});
