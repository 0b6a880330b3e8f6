import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import type { Page } from "playwright-core";

// axe-core run inside a page, for WCAG checks of the hosted page. The page's CSP is nonce-based,
// so a <script> tag added by the test (page.addScriptTag) is refused; a string given to
// page.evaluate runs through the DevTools protocol (Runtime.evaluate), which CSP does not govern,
// so axe is evaluated that way in the page as served, with its real CSP and no bypass.

const AXE_SOURCE = readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8");

/** WCAG 2.0/2.1 A and AA, and the 2.2 AA rules. */
export const WCAG_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa"];

export interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  /** The CSS selectors of the offending elements, with a short summary of each failure. */
  nodes: { target: string; summary: string }[];
}

/** Runs axe-core on the page's current document and returns its violations (none: []). */
export async function axeViolations(page: Page, tags: string[] = WCAG_TAGS): Promise<AxeViolation[]> {
  const loaded = await page.evaluate(
    `(() => { if (!window.axe) { ${AXE_SOURCE}\n } return typeof window.axe?.run; })()`,
  );
  if (loaded !== "function") throw new Error(`axe-core did not load in the page (axe.run: ${loaded})`);
  return page.evaluate(async (runOnly) => {
    type Result = {
      id: string;
      impact?: string | null;
      help: string;
      nodes: { target: unknown[]; failureSummary?: string }[];
    };
    const axe = (
      window as Window & {
        axe?: { run(ctx: Document, opts: object): Promise<{ violations: Result[]; passes: unknown[] }> };
      }
    ).axe;
    if (!axe) throw new Error("axe is gone");
    const result = await axe.run(document, {
      runOnly: { type: "tag", values: runOnly },
      resultTypes: ["violations"],
    });
    // A run that applied no rule at all (no pass, no violation) checked nothing: a broken run, not a clean page.
    if (result.passes.length + result.violations.length === 0) throw new Error("axe-core applied no rule");
    return result.violations.map((v) => ({
      id: v.id,
      impact: v.impact ?? null,
      help: v.help,
      nodes: v.nodes.map((n) => ({
        target: n.target.map(String).join(" "),
        summary: (n.failureSummary ?? "").replace(/\s+/g, " ").trim(),
      })),
    }));
  }, tags);
}

/** Violations as lines a reviewer can act on: `id (impact): help — target: summary`. */
export function formatViolations(violations: AxeViolation[]): string {
  return violations
    .flatMap((v) => [
      `${v.id} (${v.impact ?? "n/a"}): ${v.help}`,
      ...v.nodes.map((n) => `    ${n.target}: ${n.summary}`),
    ])
    .join("\n");
}
