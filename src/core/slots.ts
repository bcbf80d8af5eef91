/**
 * State a part keeps on the object it belongs to, not in a module-level table keyed by it:
 * `Services.state` (per app, created in `createApp`: the login throttle's locks, the event
 * rule cache, token last-used writes) and `WriteContext.scratch` (per write transaction,
 * created by `writeTransaction`: the token key it issued, the outbox rows it wrote, the
 * deletes under way). Each part declares its own typed key; the state goes with its owner.
 */

/** A typed slot of a `Slots`; each part declares its own with `slotKey<T>("name")`. */
export interface SlotKey<T> {
  readonly name: string;
  /** Carries `T` for the type checker only. */
  readonly __value?: T;
}

/** A new key (an identity: two keys with one name are two slots). */
export const slotKey = <T>(name: string): SlotKey<T> => ({ name });

export class Slots {
  readonly #slots = new Map<SlotKey<unknown>, unknown>();

  get<T>(key: SlotKey<T>): T | undefined {
    return this.#slots.get(key) as T | undefined;
  }

  set<T>(key: SlotKey<T>, value: T): T {
    this.#slots.set(key, value);
    return value;
  }

  /** The slot's value, made by `make` the first time. */
  ensure<T>(key: SlotKey<T>, make: () => T): T {
    return this.#slots.has(key) ? (this.#slots.get(key) as T) : this.set(key, make());
  }

  delete(key: SlotKey<unknown>): void {
    this.#slots.delete(key);
  }
}
