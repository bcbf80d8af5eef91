/**
 * The delete hooks of a staged delete of many objects of one type (decision 0184): set-based where
 * a hook can (`stageMany`), read in the delete's one read; the others per object, read only once
 * the objects are found to exist, so ids that do not cost no read and no statement built.
 */
import { yieldWhenDue } from "../../turns";
import type { StagedHook, StagedMany, WriteContext } from "../context";
import { ReadPhase } from "./write-batch";

type Targets = { appLabel: string; model: string; ids: number[]; objectTypeId?: number };

export interface StagedDeleteHooks {
  /** After the read phase: throws a set-based hook's refusal of deleting `id`, if any. */
  admit(id: number): Promise<void>;
  /** After every id was admitted: the hooks' parts for all of them, in order. */
  parts(): Promise<StagedHook[]>;
}

/**
 * Stages every delete hook for `targets.ids` (distinct) in `phase`. One id is staged by every hook
 * in the phase as before; for more, a hook without `stageMany` reads in a second phase, of the
 * ids admitted only (none is read for an id the first phase did not find).
 */
export function stageDeleteHooks(
  ctx: WriteContext,
  phase: ReadPhase,
  targets: Targets,
): StagedDeleteHooks {
  const hooks = ctx.services.deleteHooks;
  const many = hooks.map((h) =>
    targets.ids.length > 1 ? h.stageMany?.(ctx, phase, targets) : null,
  );
  const alone = hooks.filter((_, i) => !many[i]);
  const target = (id: number) => ({
    appLabel: targets.appLabel,
    model: targets.model,
    id,
    objectTypeId: targets.objectTypeId,
  });
  const stageAlone = (into: ReadPhase) =>
    targets.ids.map((id) => alone.map((h) => h.stage!(ctx, into, target(id))));
  const early = targets.ids.length === 1 ? stageAlone(phase) : null;
  const sets = many.filter((m): m is StagedMany => !!m);
  return {
    async admit(id) {
      for (const m of sets) await m.admit(id);
    },
    async parts() {
      const out: StagedHook[] = [];
      for (const m of sets) out.push(await m.part());
      let answers = early;
      if (!answers && alone.length) {
        const late = new ReadPhase();
        answers = [];
        for (const id of targets.ids) {
          answers.push(alone.map((h) => h.stage!(ctx, late, target(id))));
          await yieldWhenDue();
        }
        await late.run(ctx);
      }
      for (const perId of answers ?? []) {
        for (const answer of perId) out.push(await answer());
        await yieldWhenDue();
      }
      return out;
    },
  };
}
