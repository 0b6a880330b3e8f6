import { describe, expect, it } from "vitest";
import { formatDateTime, formatDecimal, negotiateLang } from "../../src/modules/hosted-page/i18n.ts";
import { contrastRatio, langHref, textOn } from "../../src/modules/hosted-page/layout.ts";

// The hosted page's language choice and locale formatting: exact amounts (never through a float),
// Accept-Language with q-values and region fallback, ?lang= overriding.

describe("negotiateLang", () => {
  it.each([
    [undefined, undefined, "en"],
    ["fr-CA,fr;q=0.9,en;q=0.8", undefined, "fr"],
    ["de-DE", undefined, "de"],
    ["ja,es;q=0.5,en;q=0.4", undefined, "es"],
    ["en;q=0.2,de;q=0.9", undefined, "de"],
    ["fr;q=0,es", undefined, "es"],
    ["ja, zh", undefined, "en"],
    ["*", undefined, "en"],
    ["fr", "de", "de"],
    ["fr", "ES", "es"],
    ["fr", "xx", "fr"],
    ["fr", ["de"], "fr"],
    ["garbage;;;q=abc,,", undefined, "en"],
  ])("%s with ?lang=%s → %s", (header, query, expected) => {
    expect(negotiateLang(header, query)).toBe(expected);
  });
});

describe("formatDecimal", () => {
  it("formats amounts in each locale, every fraction digit kept", () => {
    expect(formatDecimal("en", "1234.5")).toBe("1,234.5");
    expect(formatDecimal("fr", "1234.5")).toBe("1\u202f234,5");
    expect(formatDecimal("de", "1234.5")).toBe("1.234,5");
    expect(formatDecimal("es", "12345.25")).toBe("12.345,25");
    expect(formatDecimal("en", "30.00")).toBe("30.00");
  });

  it("does not round an 18-decimal ETH amount", () => {
    expect(formatDecimal("en", "1.123456789012345678")).toBe("1.123456789012345678");
    expect(formatDecimal("fr", "9007199254740993.000000000000000001")).toBe(
      "9\u202f007\u202f199\u202f254\u202f740\u202f993,000000000000000001",
    );
  });

  it("leaves anything that is not a plain decimal as it is", () => {
    expect(formatDecimal("en", "abc")).toBe("abc");
  });
});

describe("formatDateTime", () => {
  it("writes the date in the chosen language", () => {
    expect(formatDateTime("en", "2026-03-05T10:20:30.000Z")).toContain("March 5, 2026");
    expect(formatDateTime("fr", "2026-03-05T10:20:30.000Z")).toContain("5 mars 2026");
    expect(formatDateTime("de", "2026-03-05T10:20:30.000Z")).toContain("5. März 2026");
    expect(formatDateTime("es", "2026-03-05T10:20:30.000Z")).toContain("5 de marzo de 2026");
  });
});

describe("brand colour contrast", () => {
  it.each(["#000000", "#ffffff", "#1f3fbf", "#ffcc00", "#ff0000", "#00aa55", "#222222", "#cccccc"])(
    "text on %s reaches 4.5:1",
    (brand) => {
      expect(contrastRatio(brand, textOn(brand))).toBeGreaterThanOrEqual(4.5);
    },
  );

  it("picks white on dark colours and black on light ones", () => {
    expect(textOn("#1f3fbf")).toBe("#ffffff");
    expect(textOn("#ffcc00")).toBe("#000000");
    expect(contrastRatio("#000000", "#ffffff")).toBeCloseTo(21, 5);
  });
});

describe("langHref", () => {
  it("keeps the other query parameters", () => {
    expect(langHref("/pay/p1", new URLSearchParams("network=base&lang=en"), "fr")).toBe(
      "/pay/p1?network=base&lang=fr",
    );
  });
});
