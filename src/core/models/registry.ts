/**
 * Every model the API can point at, keyed by `app_label.model`: its resource and its nested
 * form. Plugins add resolvers for labels known only at run time (custom object types).
 */
import type { ApiRecord, ReadContext, Resource } from "../rest/resource";

export interface ModelInfo {
  appLabel: string;
  model: string;
  verboseName: string;
  /** Nested representations `{id, url, display, …}` keyed by id; unknown ids are absent. */
  nested(ctx: ReadContext, ids: number[]): Promise<Map<number, ApiRecord>>;
  resource?: Resource;
}

type Resolver = (model: string, ctx: ReadContext) => Promise<ModelInfo | null>;

export class ModelRegistry {
  #static = new Map<string, ModelInfo>();
  #resolvers = new Map<string, Resolver>();

  register(info: ModelInfo) {
    this.#static.set(`${info.appLabel}.${info.model}`, info);
  }

  addResolver(appLabel: string, resolver: Resolver) {
    this.#resolvers.set(appLabel, resolver);
  }

  staticModels(): ModelInfo[] {
    return [...this.#static.values()];
  }

  async get(appLabel: string, model: string, ctx: ReadContext): Promise<ModelInfo | null> {
    const found = this.#static.get(`${appLabel}.${model}`);
    if (found) return found;
    const resolver = this.#resolvers.get(appLabel);
    return resolver ? resolver(model, ctx) : null;
  }
}
