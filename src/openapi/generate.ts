/**
 * Builds the OpenAPI 3.1 document of one app. The static part comes from code; plugins add a
 * run-time part (one set of paths per custom object type). Documents are cached per app (an
 * `OpenApiDocuments` made by `createApp`) and
 * keyed by the plugins' fingerprints, so a schema apply or field change shows up on the very
 * next request while unchanged state costs one cheap query per plugin. Callers who may not view
 * some custom object types get a filtered copy, cached per set of hidden types.
 */
import type { Services } from "../core/context";
import type { Queries } from "../db/client";
import { HOST_VERSION } from "../core/routes";
import { LIST_PARAMETERS, OpenApiBuilder, type PluginOpenApi, type RouteEntry } from "./builder";
import {
  ERROR_RESPONSE_COMPONENTS,
  ERROR_SCHEMAS,
  SECURITY_SCHEMES,
  SHARED_RESPONSE_COMPONENTS,
} from "./components";
import { describeCore, describeGraphql } from "./core";
import type { OpenApiDocument } from "../core/json-schema";
import { SHARED_SCHEMAS } from "./model-schemas";
import { typeSlugsOf, withoutTypes } from "./visibility";
import { answerBody, type Encoded, encodedText, type Format } from "./text";

/** Where the routes come from: the app's route table (`app.routes`). */
type RouteTable = () => ReadonlyArray<RouteEntry>;

export type { OpenApiDocument };

/** One form of the document (all types, or without those a caller may not view) and its serialisations. */
interface Variant {
  /** The fingerprints of the build it belongs to (`Cached.key`). */
  key: string;
  doc: OpenApiDocument;
  /**
   * Its text by format, as bytes (shared while they are made): one per format whatever the
   * origin, which only `servers` names (a text per Host header cost a serialisation each).
   */
  texts: Map<Format, Promise<Encoded>>;
}

interface Cached {
  key: string;
  full: Variant;
  /** Slugs of the custom object types the full document describes. */
  slugs: string[];
  /** Filtered forms keyed by the sorted hidden slugs (shared while they are made). */
  variants: Map<string, Promise<Variant>>;
}
/** Distinct visibility sets kept per schema version (one per permission profile in practice). */
const MAX_VARIANTS = 32;

/** Says whether the caller may view the custom object type `slug`; absent: every type is shown. */
export type TypeVisibility = (slug: string) => boolean;

/** What the document of one app is made of: its services, the plugins' parts and its route table. */
export interface DocumentSources {
  services: Services;
  /** The OpenAPI parts of the enabled plugins, by plugin name. */
  parts: Array<{ name: string; openapi?: PluginOpenApi }>;
  routes: RouteTable;
}

const withServer = (doc: OpenApiDocument, baseUrl: string): OpenApiDocument => ({
  ...doc,
  servers: [{ url: baseUrl, description: "This server" }],
});

/** Reads statements in one round trip (the route's: with the request's guards, `freshRead`). */
type Read = (queries: Queries) => Promise<readonly unknown[]>;

/** The documents of one app, cached while the plugins' fingerprints hold (one per app, made by `createApp`). */
export class OpenApiDocuments {
  #cached: Cached | null = null;
  /** Variants holding texts, oldest use first, with the bytes of their texts. */
  #kept = new Map<Variant, number>();

  constructor(readonly sources: DocumentSources) {}

  /** Bytes of serialised texts kept now (every variant, every format). */
  keptTextBytes(): number {
    let bytes = 0;
    for (const n of this.#kept.values()) bytes += n;
    return bytes;
  }

  /**
   * Counts `entry`'s texts as just used, then drops the texts of the variants used longest ago
   * while the kept bytes are past the budget (`OPENAPI_CACHE_MB`): one caller's many visibility
   * sets cannot grow the cache by a document each. `entry`'s own are kept, whatever their size.
   */
  #keep(entry: Variant, encoded: Encoded): void {
    if (entry.key !== this.#cached?.key) return; // a text of a document already replaced
    const bytes = [...encoded.head, ...encoded.tail].reduce((n, c) => n + c.byteLength, 0);
    const before = this.#kept.get(entry) ?? 0;
    this.#kept.delete(entry);
    this.#kept.set(entry, before + bytes);
    let total = this.keptTextBytes();
    const budget = this.sources.services.config.openApiCacheBytes;
    for (const [variant, n] of this.#kept) {
      if (total <= budget || variant === entry) break;
      variant.texts.clear();
      this.#kept.delete(variant);
      total -= n;
    }
  }

  /** The fingerprints of everything run-time the document depends on, in one `read`. */
  async #fingerprint(read: Read): Promise<string> {
    const { services, parts } = this.sources;
    const printed = parts.filter((p) => p.openapi?.fingerprint);
    const answers = printed.length
      ? await read(printed.map((p) => p.openapi!.fingerprint!(services)) as unknown as Queries)
      : [];
    const prints = new Map(
      printed.map((p, i) => [p.name, (answers[i] as { k: string }[])[0]?.k ?? ""]),
    );
    return parts.map((p) => `${p.name}:${prints.get(p.name) ?? ""}`).join("\n");
  }

  /** The document under way (built with turns): requests meanwhile wait for it (decision 0205). */
  #building: { key: string; entry: Promise<Cached> } | null = null;

  async #current(read: Read): Promise<Cached> {
    const key = await this.#fingerprint(read);
    const entry = this.#cached;
    if (entry?.key === key) return entry;
    if (this.#building?.key !== key) {
      const building = { key, entry: this.#build(key) };
      this.#building = building;
      building.entry.then(
        (built) => {
          // a build a later schema change overtook is not kept: the later one will be
          if (this.#building !== building) return;
          this.#building = null;
          this.#cached = built;
          this.#kept.clear(); // the texts of the documents it replaces
        },
        () => {
          if (this.#building === building) this.#building = null;
        },
      );
    }
    return this.#building!.entry;
  }

  async #build(key: string): Promise<Cached> {
    const doc = await buildDocument(this.sources);
    const full = { key, doc, texts: new Map() };
    return { key, full, slugs: typeSlugsOf(doc), variants: new Map() };
  }

  async #variant(canView?: TypeVisibility, read?: Read): Promise<Variant> {
    const entry = await this.#current(read ?? ((q) => this.sources.services.db.read(q)));
    const hidden = canView ? entry.slugs.filter((slug) => !canView(slug)) : [];
    if (!hidden.length) return entry.full;
    const key = hidden.sort().join(",");
    let found = entry.variants.get(key);
    if (!found) {
      // shared while it is made (with turns), as the full document is
      found = withoutTypes(entry.full.doc, new Set(hidden)).then((doc) => ({
        key: entry.key,
        doc,
        texts: new Map(),
      }));
      if (entry.variants.size >= MAX_VARIANTS) {
        entry.variants.clear();
        for (const variant of this.#kept.keys())
          if (variant !== entry.full) this.#kept.delete(variant);
      }
      entry.variants.set(key, found);
      found.catch(() => entry.variants.delete(key));
    }
    return found;
  }

  /** The document (cached while the fingerprints hold), with `servers` set to `baseUrl`. */
  async document(baseUrl: string, canView?: TypeVisibility): Promise<OpenApiDocument> {
    return withServer((await this.#variant(canView)).doc, baseUrl);
  }

  /**
   * The document serialised as JSON or YAML (cached like the document) as an answer's body and
   * its length in bytes, with `servers` set to `baseUrl`.
   */
  async text(
    baseUrl: string,
    format: Format,
    canView?: TypeVisibility,
    read?: Read,
  ): Promise<{ body: ReadableStream<Uint8Array>; length: number }> {
    const entry = await this.#variant(canView, read);
    let text = entry.texts.get(format);
    if (text === undefined) {
      // written and encoded with turns, a path and a component schema a step (0205, 0210)
      text = encodedText(entry.doc as unknown as Record<string, unknown>, format);
      entry.texts.set(format, text);
      text.then(
        (encoded) => this.#keep(entry, encoded),
        () => entry.texts.delete(format),
      );
    } else if (this.#kept.has(entry)) {
      // used now: the last to be dropped
      const bytes = this.#kept.get(entry)!;
      this.#kept.delete(entry);
      this.#kept.set(entry, bytes);
    }
    return answerBody(await text, format, withServer(entry.doc, baseUrl).servers);
  }
}

/** Builds the document from scratch (no cache). */
async function buildDocument({
  services,
  parts,
  routes,
}: DocumentSources): Promise<OpenApiDocument> {
  const b = new OpenApiBuilder({ loginRequired: services.config.loginRequired });
  b.addSchemas({ ...ERROR_SCHEMAS, ...SHARED_SCHEMAS });
  describeCore(b, services);
  describeGraphql(b);
  for (const part of parts) await part.openapi?.describe(b, services);
  const { paths, undocumented } = await b.paths(routes());
  const sortedSchemas = Object.fromEntries(
    Object.keys(b.schemas)
      .sort()
      .map((k) => [k, b.schemas[k]!]),
  );
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
      responses: { ...ERROR_RESPONSE_COMPONENTS, ...SHARED_RESPONSE_COMPONENTS },
      securitySchemes: SECURITY_SCHEMES,
    },
    ...(undocumented.length ? { "x-undocumented-routes": undocumented } : {}),
  };
}
