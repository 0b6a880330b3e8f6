import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";

// Every query of the service names its columns (issue 39, item 5). In a rolling upgrade the new
// release migrates the database while instances of the old one still serve: a migration that
// adds a column changed the rows of the old instances' SELECT * and RETURNING *, and their
// prepared statements failed with "cached plan must not change result type"
// (src/platform/db/preparing-client.ts). A query that names its columns returns the same row
// whatever a later migration adds; src/platform/db/columns.ts keeps a repo's list of a table's
// columns complete against the table's type.
//
// This test reads every .ts file under src/ and fails, naming file:line, for Kysely's selectAll(
// and returningAll(, and for SQL that takes every column: SELECT *, RETURNING *, and the alias.*
// forms (p.*, "p".*, ${alias}.*). SELECT * FROM unnest(…) is allowed: the statement itself fixes
// its columns. Comments and regular expression literals are blanked first, so that they may say
// what they like.

const ROOT = join(import.meta.dirname, "..", "..");
const SRC = join(ROOT, "src");

const EVERY_COLUMN: ReadonlyArray<[RegExp, string]> = [
  [/\b(?:selectAll|returningAll)\s*\(/g, "Kysely's selectAll/returningAll"],
  [/\bselect\s+(?:distinct\s+)?\*(?!\s*from\s+unnest\s*\()/gi, "SELECT *"],
  [/\breturning\s+\*/gi, "RETURNING *"],
  // Outside comments and regular expressions, `.*` is only ever SQL: p.*, "p".*, ${alias}.*
  [/[\w"}]\.\*/g, "alias.*"],
];

/** After one of these (or at the start), a `/` begins a regular expression, not a division. */
const BEFORE_REGEXP = new Set([..."(,=:[!&|?{};+-*%<>~^"]);

/**
 * `text` with the contents of its comments and regular expression literals turned into spaces
 * (line breaks kept, so every offset and line stays where it was); strings, templates and the
 * code in templates' substitutions are kept.
 */
function blankCommentsAndRegexps(text: string): string {
  const out = text.split("");
  const blank = (from: number, to: number) => {
    for (let k = from; k < to; k++) if (out[k] !== "\n") out[k] = " ";
  };
  /** The brace depth at which each open template substitution (`${`) closes. */
  const substitutions: number[] = [];
  let depth = 0;
  let previous = "";
  let i = 0;
  /** From inside a template at `from`: past its closing backtick, or into a substitution. */
  const template = (from: number): number => {
    let k = from;
    while (k < text.length) {
      if (text[k] === "\\") k += 2;
      else if (text[k] === "`") return k + 1;
      else if (text[k] === "$" && text[k + 1] === "{") {
        substitutions.push(depth++);
        return k + 2;
      } else k++;
    }
    return k;
  };
  while (i < text.length) {
    const c = text[i] as string;
    const next = text[i + 1];
    if (c === "/" && next === "/") {
      const end = text.indexOf("\n", i);
      const stop = end === -1 ? text.length : end;
      blank(i, stop);
      i = stop;
    } else if (c === "/" && next === "*") {
      const end = text.indexOf("*/", i + 2);
      const stop = end === -1 ? text.length : end + 2;
      blank(i, stop);
      i = stop;
    } else if (c === '"' || c === "'") {
      let k = i + 1;
      while (k < text.length && text[k] !== c && text[k] !== "\n") k += text[k] === "\\" ? 2 : 1;
      i = k + 1;
      previous = c;
    } else if (c === "`") {
      i = template(i + 1);
      previous = "`";
    } else if (c === "}" && substitutions.at(-1) === depth - 1) {
      substitutions.pop();
      depth--;
      i = template(i + 1);
      previous = "`";
    } else if (
      c === "/" &&
      (previous === "" ||
        BEFORE_REGEXP.has(previous) ||
        /\breturn\s*$/.test(text.slice(Math.max(0, i - 16), i)))
    ) {
      // A regular expression literal ends on its own line; a `/` with no end there is a division.
      let k = i + 1;
      let inClass = false;
      while (k < text.length && text[k] !== "\n" && (inClass || text[k] !== "/")) {
        if (text[k] === "\\") k++;
        else if (text[k] === "[") inClass = true;
        else if (text[k] === "]") inClass = false;
        k++;
      }
      if (text[k] === "/") {
        blank(i + 1, k);
        i = k + 1;
        previous = "/regexp";
      } else {
        previous = c;
        i++;
      }
    } else {
      if (c === "{") depth++;
      else if (c === "}") depth--;
      if (!/\s/.test(c)) previous = c;
      i++;
    }
  }
  return out.join("");
}

/** Where `text` (the source of `file`) selects or returns every column of a table: `file:line: what`. */
function everyColumnUses(file: string, text: string): string[] {
  const code = blankCommentsAndRegexps(text);
  const lineOf = (index: number) => code.slice(0, index).split("\n").length;
  return EVERY_COLUMN.flatMap(([pattern, what]) =>
    [...code.matchAll(pattern)].map((match) => ({ line: lineOf(match.index), what })),
  )
    .sort((a, b) => a.line - b.line)
    .map(({ line, what }) => `${file}:${line}: ${what}`);
}

function sourceFiles(): string[] {
  return readdirSync(SRC, { recursive: true, encoding: "utf8" })
    .filter((name) => name.endsWith(".ts"))
    .map((name) => join(SRC, name))
    .sort();
}

describe("every query names its columns (issue 39, item 5)", () => {
  it("no file under src/ selects or returns every column of a table", () => {
    const files = sourceFiles();
    expect(files.length).toBeGreaterThan(100);
    const found = files.flatMap((file) => everyColumnUses(relative(ROOT, file), readFileSync(file, "utf8")));
    expect(found, "name the columns (src/platform/db/columns.ts)").toEqual([]);
  });

  it("finds each form, and leaves comments, regular expressions and SELECT * FROM unnest alone", () => {
    // A file's text, one case a line (numbered from 1).
    const sample = `db.selectFrom("payments").selectAll().execute();
db.updateTable("payouts").set(s).returningAll().execute();
sql\`SELECT * FROM payments\`;
sql\`UPDATE payouts SET status = \${s ? \`a\` : \`b\`}
  RETURNING *\`;
sql\`select p.*, "q".* FROM \${t} p\`;
sql\`SELECT \${alias}.* FROM t\`;
const text = "insert into t select * from u";
sql\`SELECT * FROM unnest(\${ids}::uuid[]) AS t(id)\`; sql\`SELECT *
  FROM unnest(\${x}::int[])\`;
// A prepared SELECT * fails, and so do RETURNING * and p.* (selectAll()).
/** SELECT * in a doc comment. */ const half = a / 2 / b;
const re = /select .*["\`]/i; const url = "https://example.com/x"; // SELECT *
const after = sql\`SELECT * FROM t\`;`;
    expect(everyColumnUses("sample.ts", sample)).toEqual([
      "sample.ts:1: Kysely's selectAll/returningAll",
      "sample.ts:2: Kysely's selectAll/returningAll",
      "sample.ts:3: SELECT *",
      "sample.ts:5: RETURNING *",
      "sample.ts:6: alias.*",
      "sample.ts:6: alias.*",
      "sample.ts:7: alias.*",
      "sample.ts:8: SELECT *",
      "sample.ts:14: SELECT *",
    ]);
  });
});
