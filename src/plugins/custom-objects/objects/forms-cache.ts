/**
 * The forms cache: nested forms of related objects that pages of custom objects name, kept while
 * the database is unchanged. A page of 50 names the same sites again and again, and parsing their
 * JSON text per row cost more than the rest of a value. Only `read.ts`'s loader uses it; what it
 * keeps is keyed by the database's change stamp (`core/database-stamp.ts`), which no caller sees.
 */
import type { Services } from "../../../core/context";
import { databaseStamp } from "../../../core/database-stamp";
import { deepFreeze } from "../../../core/rest/page-anchors";
import type { Nested } from "./read";

/** Forms kept at most (then dropped all together): bounds what one loader holds. */
const FORMS_CACHED = 5000;

interface Kept {
  stamp: string;
  /** Their `url`s name the host they were read for. */
  baseUrl: string;
  forms: Nested;
  size: number;
}

/** One page read's use of the cache, opened before its rows are read. */
export interface FormsRead {
  /** The forms to serve the page from. */
  readonly forms: Nested;
  /** False once a commit came after the open: the rows just read may be newer than the forms. */
  fresh(): boolean;
  /** Keeps the forms the page had to read, if nothing committed since the open. */
  keep(learned: Nested): void;
}

/** Nested forms of related objects for one loader, valid under one change stamp and base URL. */
export class FormsCache {
  #kept: Kept | null = null;

  /**
   * A read's use of the cache; null where the database knows no change stamp (every form is then
   * read with the rows).
   */
  open(services: Pick<Services, "db">, baseUrl: string): FormsRead | null {
    const stamp = databaseStamp(services);
    if (stamp === null) return null;
    const kept = this.#current(stamp, baseUrl);
    const unchanged = () => databaseStamp(services) === kept.stamp;
    return {
      forms: kept.forms,
      fresh: unchanged,
      keep(learned) {
        // kept only if nothing committed meanwhile (they may be newer than the stamp says otherwise)
        if (!learned.size || !unchanged()) return;
        for (const [typeId, forms] of learned) {
          const into = kept.forms.get(typeId) ?? kept.forms.set(typeId, new Map()).get(typeId)!;
          // shared by later requests: frozen through, so nothing can change one for all of them
          for (const [id, form] of forms) into.set(id, deepFreeze(form));
          kept.size += forms.size;
        }
      },
    };
  }

  #current(stamp: string, baseUrl: string): Kept {
    const kept = this.#kept;
    if (!kept || kept.stamp !== stamp || kept.baseUrl !== baseUrl || kept.size > FORMS_CACHED)
      this.#kept = { stamp, baseUrl, forms: new Map(), size: 0 };
    return this.#kept!;
  }
}
