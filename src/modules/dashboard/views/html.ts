import { HtmlSafeString, join, safe } from "escape-html-template-tag";

// Every dashboard page is built with this tag: each value put into a template is escaped unless
// it is itself a template (or an SVG we drew, marked `safe`), so a merchant's or payer's string
// cannot become markup. The package's default export is this same one-liner; its types describe
// it as CommonJS while Node loads its ES module, so the named class is used instead.
export function html(parts: TemplateStringsArray, ...subs: unknown[]): HtmlSafeString {
  return new HtmlSafeString(parts, subs);
}

export { type HtmlSafeString, join, safe };

/** Nothing, where a template wants an optional part. */
export const nothing = html``;
