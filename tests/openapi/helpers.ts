/**
 * Validates real requests and responses against the app's own OpenAPI document: the document
 * is added to Ajv (JSON Schema 2020-12, the dialect of OpenAPI 3.1) and each check compiles the
 * schema an operation declares, by JSON pointer, so every `$ref` resolves inside the document.
 */
import Ajv2020 from "ajv/dist/2020";
import addFormats from "ajv-formats";
import type { TestApp } from "../helpers/app";

const DOC_ID = "host-openapi.json";
const esc = (s: string) => s.replace(/~/g, "~0").replace(/\//g, "~1");

export interface Contract {
  doc: any;
  /** Errors of `body` against the response schema of `method path` for `status` (empty when it matches). */
  responseErrors(path: string, method: string, status: number, body: unknown): string[];
  /** Errors of `body` against the JSON request body schema of `method path`. */
  requestErrors(path: string, method: string, body: unknown): string[];
  /** Errors of `value` against a component schema. */
  schemaErrors(name: string, value: unknown): string[];
}

export async function contractFor(t: TestApp): Promise<Contract> {
  const res = await t.json("GET", "/api/schema/");
  if (res.status !== 200) throw new Error(`GET /api/schema/: ${res.status}`);
  return contractOf(res.body);
}

export function contractOf(doc: any): Contract {
  const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: true });
  addFormats(ajv);
  ajv.addSchema({ ...doc, $id: DOC_ID });
  const compiled = new Map<string, ReturnType<typeof ajv.compile>>();
  const check = (pointer: string, value: unknown) => {
    let validate = compiled.get(pointer);
    if (!validate) {
      validate = ajv.compile({ $ref: `${DOC_ID}#${pointer}` });
      compiled.set(pointer, validate);
    }
    return validate(value)
      ? []
      : (validate.errors ?? []).map(
          (e) => `${e.instancePath || "/"} ${e.message} ${JSON.stringify(e.params)}`,
        );
  };
  const operation = (path: string, method: string) => {
    const op = doc.paths[path]?.[method.toLowerCase()];
    if (!op) throw new Error(`the document has no ${method} ${path}`);
    return `/paths/${esc(path)}/${method.toLowerCase()}`;
  };
  return {
    doc,
    responseErrors(path, method, status, body) {
      const base = operation(path, method);
      const responses = doc.paths[path][method.toLowerCase()].responses;
      const declared = responses[String(status)];
      if (!declared)
        return [
          `${method} ${path} declares no ${status} response (has ${Object.keys(responses).join(", ")})`,
        ];
      let pointer = `${base}/responses/${status}`;
      if (declared.$ref) pointer = declared.$ref.slice(1);
      const resolved = declared.$ref
        ? doc.components.responses[declared.$ref.split("/").pop()]
        : declared;
      if (!resolved.content?.["application/json"])
        return body === null || body === undefined ? [] : [`${status} declares no JSON body`];
      return check(`${pointer}/content/application~1json/schema`, body);
    },
    requestErrors(path, method, body) {
      return check(`${operation(path, method)}/requestBody/content/application~1json/schema`, body);
    },
    schemaErrors(name, value) {
      if (!doc.components.schemas[name]) return [`no component ${name}`];
      return check(`/components/schemas/${esc(name)}`, value);
    },
  };
}
