import { InvalidRequest } from "../../domain/errors.ts";

// The rules every piece of client text passes where it enters (issue 20): JSON bodies here, in the
// one body parser; query strings and path segments in validation.ts. Each refusal is a 400 naming
// the field, so no route or service meets these values.

/** Deep enough for any real metadata; deeper bodies are refused before anything recurses on them. */
export const MAX_JSON_DEPTH = 32;
const TEXT_RULE = "must not contain NUL characters or unpaired UTF-16 surrogates";

/**
 * Text a PostgreSQL text or jsonb column can hold: no U+0000 and no lone UTF-16 surrogate (JSON's
 * `\ud800` escape makes one; neither is ever meaningful text).
 */
export function isWellFormedText(value: string): boolean {
  return value.isWellFormed() && !value.includes("\u0000");
}

export function textProblem(field: string): string {
  return `${field} ${TEXT_RULE}`;
}

/**
 * Parses a JSON request body: "Invalid JSON body" when malformed (D10); otherwise the first string
 * or key that breaks the text rule, object nested deeper than MAX_JSON_DEPTH, or key that would
 * poison a prototype (`__proto__`, `constructor.prototype`, as Fastify's own parser refuses) is
 * refused with its path, e.g. "metadata.order must not contain NUL characters…".
 */
export function parseJsonBody(text: string): unknown {
  const source = text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
  if (source.trim() === "") return undefined;
  let value: unknown;
  try {
    value = JSON.parse(source);
  } catch {
    throw new InvalidRequest("Invalid JSON body");
  }
  const problem = bodyProblem(value);
  if (problem) throw new InvalidRequest(problem);
  return value;
}

/**
 * The same rules for a JSON value that arrived some other way (decoded from a base64 header value
 * inside a body): the first problem, named from `name` (`paymentRequired.resource.url …`), or null.
 */
export function jsonValueProblem(value: unknown, name: string): string | null {
  return bodyProblem(value, name);
}

interface Frame {
  value: unknown;
  path: string;
  depth: number;
}

/** Iterative on purpose: a 1 MiB body can nest 500 000 levels, beyond any call stack. */
function bodyProblem(root: unknown, rootPath = ""): string | null {
  const stack: Frame[] = [{ value: root, path: rootPath, depth: 0 }];
  for (let frame = stack.pop(); frame !== undefined; frame = stack.pop()) {
    const { value, path, depth } = frame;
    const field = path || "body";
    if (typeof value === "string") {
      if (!isWellFormedText(value)) return textProblem(field);
      continue;
    }
    if (value === null || typeof value !== "object") continue;
    if (depth >= MAX_JSON_DEPTH) {
      return `${field} is nested too deeply (at most ${MAX_JSON_DEPTH} levels of objects and arrays)`;
    }
    if (Array.isArray(value)) {
      for (let i = value.length - 1; i >= 0; i--) {
        stack.push({ value: value[i], path: `${field}[${i}]`, depth: depth + 1 });
      }
      continue;
    }
    const record = value as Record<string, unknown>;
    const keys = Object.keys(record);
    for (let i = keys.length - 1; i >= 0; i--) {
      const key = keys[i] as string;
      if (!isWellFormedText(key)) return `${field} keys ${TEXT_RULE}`;
      if (key === "__proto__") return `${field} must not have a key named __proto__`;
      const child = record[key];
      const childPath = path ? `${path}.${shortKey(key)}` : shortKey(key);
      if (key === "constructor" && isObject(child) && Object.hasOwn(child, "prototype")) {
        return `${childPath} must not have a key named prototype`;
      }
      stack.push({ value: child, path: childPath, depth: depth + 1 });
    }
  }
  return null;
}

function isObject(value: unknown): value is object {
  return typeof value === "object" && value !== null;
}

/** Keys are named in messages, but a 1 MiB key is not echoed back whole. */
function shortKey(key: string): string {
  return key.length > 40 ? `${Array.from(key).slice(0, 40).join("")}…` : key;
}
