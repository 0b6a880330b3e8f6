import { Ajv } from "ajv";
import addFormats from "ajv-formats";
import type { FastifyInstance, FastifySchemaCompiler } from "fastify";
import { InvalidRequest } from "../../domain/errors.ts";
import { isWellFormedText, textProblem } from "./input-rules.ts";

// Two validators: query strings and path parameters arrive as text and are coerced ("50" → 50);
// JSON bodies are never coerced, so `amount: 100` (a number) is refused instead of silently
// becoming "100" (D13).
function makeAjv(coerceTypes: boolean): Ajv {
  const ajv = new Ajv({
    coerceTypes,
    useDefaults: true,
    removeAdditional: false,
    allErrors: false,
    strict: false,
  });
  // A boundary: ajv-formats is CommonJS, and under NodeNext resolution its default export is typed
  // as the module object although at run time it is the function.
  (addFormats as unknown as (ajv: Ajv) => void)(ajv);
  return ajv;
}

const bodyAjv = makeAjv(false);
const textAjv = makeAjv(true);

export function registerValidation(app: FastifyInstance): void {
  app.setValidatorCompiler(({ schema, httpPart }) =>
    (httpPart === "body" ? bodyAjv : textAjv).compile(schema),
  );
  // The text rule of JSON bodies (input-rules.ts) for query strings, path segments and the
  // dashboard's urlencoded forms, on every route, schema or not: `%00` decodes to a NUL that no
  // text column holds.
  app.addHook("preValidation", async (request) => {
    const problem =
      textParameterProblem(request.query, "query") ??
      textParameterProblem(request.params, "path") ??
      (isForm(request.headers["content-type"]) ? textParameterProblem(request.body, "form") : null);
    if (problem) throw new InvalidRequest(problem);
  });
}

function isForm(contentType: string | undefined): boolean {
  return contentType?.toLowerCase().startsWith("application/x-www-form-urlencoded") ?? false;
}

function textParameterProblem(values: unknown, part: string): string | null {
  if (values === null || typeof values !== "object") return null;
  for (const [name, value] of Object.entries(values)) {
    if (!isWellFormedText(name)) return textProblem(`${part} parameter names`);
    for (const item of Array.isArray(value) ? value : [value]) {
      if (typeof item === "string" && !isWellFormedText(item)) return textProblem(name);
    }
  }
  return null;
}

/**
 * For bodies whose rules and messages the interface fixes word for word (payments, payouts), the
 * route schema only documents the shape; a pure domain validator checks it in the spec's order.
 */
export const documentedBodyOnly: FastifySchemaCompiler<unknown> = ({ schema, httpPart }) => {
  if (httpPart === "body") return () => true;
  return textAjv.compile(schema as object);
};

/** As documentedBodyOnly, for routes whose query too is checked by a domain validator (swap quotes). */
export const documentedBodyAndQuery: FastifySchemaCompiler<unknown> = ({ schema, httpPart }) => {
  if (httpPart === "body" || httpPart === "querystring") return () => true;
  return textAjv.compile(schema as object);
};
