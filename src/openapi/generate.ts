/**
 * Builds the OpenAPI 3.1 document of one app. The static part comes from code; plugins add a
 * run-time part (one set of paths per custom object type). Documents are cached per app and
 * keyed by the plugins' fingerprints, so a schema apply or field change shows up on the very
 * next request while unchanged state costs one cheap query per plugin.
 */
import { stringify } from "yaml";
import type { Services } from "../core/context";
import { HOST_VERSION } from "../core/routes";
import { LIST_PARAMETERS, OpenApiBuilder } from "./builder";
import { ERROR_RESPONSE_COMPONENTS, ERROR_SCHEMAS, SECURITY_SCHEMES } from "./components";
import { describeCore, describeDocs } from "./core";
import { SHARED_SCHEMAS } from "./model-schemas";

/** Where the routes come from: the app's route table (`app.routes`). */
export type RouteTable = () => ReadonlyArray<{ method: string; path: string }>;

export type OpenApiDocument = Record<string, unknown> & { paths: Record<string, Record<string, Record<string, unknown>>> };

interface Cached {
  key: string;
  doc: OpenApiDocument;
  /** Serialised forms by format and origin (YAML takes a while for a big document). */
  texts: Map<string, string>;
}
const cache = new WeakMap<Services, Cached>();
/** Origins come from the Host header: keep only a few serialisations. */
const MAX_TEXTS = 8;

/** The fingerprints of everything run-time the document depends on. */
async function fingerprint(services: Services): Promise<string> {
  const parts = await Promise.all(services.plugins.map(async (p) => `${p.name}:${(await p.openapi?.fingerprint?.(services)) ?? ""}`));
  return parts.join("\n");
}

async function current(services: Services, routes: RouteTable): Promise<Cached> {
  const key = await fingerprint(services);
  let entry = cache.get(services);
  if (!entry || entry.key !== key) {
    entry = { key, doc: await buildDocument(services, routes), texts: new Map() };
    cache.set(services, entry);
  }
  return entry;
}

const withServer = (doc: OpenApiDocument, baseUrl: string): OpenApiDocument => ({ ...doc, servers: [{ url: baseUrl, description: "This server" }] });

/** The document for `services` (cached while the fingerprints hold), with `servers` set to `baseUrl`. */
export async function openApiDocument(services: Services, routes: RouteTable, baseUrl: string): Promise<OpenApiDocument> {
  return withServer((await current(services, routes)).doc, baseUrl);
}

/** The document serialised as JSON or YAML, cached like the document. */
export async function openApiText(services: Services, routes: RouteTable, baseUrl: string, format: "json" | "yaml"): Promise<string> {
  const entry = await current(services, routes);
  const textKey = `${format} ${baseUrl}`;
  let text = entry.texts.get(textKey);
  if (text === undefined) {
    const doc = withServer(entry.doc, baseUrl);
    text = format === "yaml" ? stringify(doc, { aliasDuplicateObjects: false, lineWidth: 0 }) : JSON.stringify(doc);
    if (entry.texts.size >= MAX_TEXTS) entry.texts.clear();
    entry.texts.set(textKey, text);
  }
  return text;
}

/** Builds the document from scratch (no cache). */
export async function buildDocument(services: Services, routes: RouteTable): Promise<OpenApiDocument> {
  const b = new OpenApiBuilder({ loginRequired: services.config.loginRequired });
  b.addSchemas({ ...ERROR_SCHEMAS, ...SHARED_SCHEMAS });
  describeCore(b, services);
  describeDocs(b);
  for (const plugin of services.plugins) await plugin.openapi?.describe(b, services);
  const { paths, undocumented } = b.paths(routes());
  const sortedSchemas = Object.fromEntries(Object.keys(b.schemas).sort().map((k) => [k, b.schemas[k]!]));
  return {
    openapi: "3.1.0",
    info: {
      title: "Host API",
      version: HOST_VERSION,
      description:
        "NetBox-compatible REST API of Host: host models, custom object types (one set of paths per type) and plugins. " +
        "Authenticate with `Authorization: Token <key>` (or `Bearer <key>`). Lists take `limit`, `offset`, `ordering`, `q`, " +
        "`brief`, `fields`, `omit` and per-field filters with NetBox lookups (`__n`, `__ic`, `__gt`, …).",
    },
    servers: [],
    security: [{ tokenAuth: [] }, { bearerAuth: [] }],
    tags: [...b.tags].map(([name, description]) => ({ name, description })),
    paths,
    components: {
      schemas: sortedSchemas,
      parameters: LIST_PARAMETERS,
      responses: ERROR_RESPONSE_COMPONENTS,
      securitySchemes: SECURITY_SCHEMES,
    },
    ...(undocumented.length ? { "x-undocumented-routes": undocumented } : {}),
  };
}
