/**
 * The idle collection of the Bun server (decision 0060): one full collection once the server has
 * been quiet for a while after serving requests; never while one is in flight, never on a
 * server that served nothing since the last one.
 */
import { expect, test } from "bun:test";
import { heapStats } from "bun:jsc";
import { idleCollector } from "../../src/idle-gc";
import { manualClock, waitFor } from "../helpers/wait";

const ok = () => new Response("ok");

type Options = NonNullable<Parameters<typeof idleCollector>[1]>;

/**
 * A collector on a clock the test moves: `pass(ms)` advances it in 10 ms steps, running the
 * collector's periodic check after each step as its interval would.
 */
function onManualClock(fetch: Parameters<typeof idleCollector>[0], options: Options) {
  const clock = manualClock(0);
  let tick = () => {};
  const collector = idleCollector(fetch, {
    ...options,
    now: clock.now,
    every: (check) => ((tick = check), () => (tick = () => {})),
  });
  const pass = (ms: number) => {
    for (let left = ms; left > 0; left -= 10) {
      clock.advance(Math.min(10, left));
      tick();
    }
  };
  return { collector, pass };
}

test("one collection after a burst, once the server has been idle; none before any request", async () => {
  let runs = 0;
  const { collector: c, pass } = onManualClock(ok, { idleMs: 40, collect: () => runs++ });
  try {
    pass(120);
    expect(runs).toBe(0); // nothing served yet
    for (let i = 0; i < 5; i++) await c.fetch(new Request("http://x/"), null);
    pass(30);
    expect(runs).toBe(0); // not idle long enough
    pass(10);
    expect(runs).toBe(1); // idle for exactly idleMs
    pass(120);
    expect(runs).toBe(1); // still quiet: nothing new to collect
    await c.fetch(new Request("http://x/"), null);
    pass(120);
    expect(runs).toBe(2);
    expect(c.collections).toBe(2);
  } finally {
    c.stop();
  }
});

test("never while a request is in flight, however long it takes", async () => {
  let runs = 0;
  let finish!: () => void;
  const slow = () =>
    new Promise<Response>((resolve) => (finish = () => resolve(new Response("late"))));
  const { collector: c, pass } = onManualClock(slow, { idleMs: 30, collect: () => runs++ });
  try {
    const answer = c.fetch(new Request("http://x/"), null);
    pass(10_000);
    expect(runs).toBe(0);
    finish();
    expect(await (await answer).text()).toBe("late");
    pass(20);
    expect(runs).toBe(0); // idle time counts from the answer, not from the request
    pass(10);
    expect(runs).toBe(1);
  } finally {
    c.stop();
  }
});

test("a handler that throws is counted out too", async () => {
  let runs = 0;
  const { collector: c, pass } = onManualClock(
    () => {
      throw new Error("boom");
    },
    { idleMs: 30, collect: () => runs++ },
  );
  try {
    expect(() => c.fetch(new Request("http://x/"), null)).toThrow("boom");
    pass(30);
    expect(runs).toBe(1);
  } finally {
    c.stop();
  }
});

// The defaults (real clock, real interval, Bun.gc): waits for the collection, asserts no timing.
test("the default collection is a real full one: garbage left by a burst is gone after it", async () => {
  const c = idleCollector(
    () =>
      new Response(JSON.stringify(Array.from({ length: 20_000 }, (_, i) => ({ i, s: `v${i}` })))),
    { idleMs: 30 },
  );
  try {
    for (let i = 0; i < 20; i++) await (await c.fetch(new Request("http://x/"), null)).text();
    const before = heapStats().heapSize;
    await waitFor(() => c.collections > 0, { message: "the idle collection" });
    expect(c.collections).toBe(1);
    expect(heapStats().heapSize).toBeLessThan(before);
  } finally {
    c.stop();
  }
});

test("a short pause is enough once the heap has grown by half since the last collection", async () => {
  let runs = 0;
  let heap = 100;
  const { collector: c, pass } = onManualClock(ok, {
    idleMs: 1000,
    quickMs: 30,
    collect: () => ((runs += 1), (heap = 100)),
    heapBytes: () => heap,
  });
  try {
    await c.fetch(new Request("http://x/"), null);
    heap = 140; // grown, but not by half
    pass(150);
    expect(runs).toBe(0); // a short pause only: the full idle time has not passed
    await c.fetch(new Request("http://x/"), null);
    heap = 160;
    pass(20);
    expect(runs).toBe(0); // not even the short pause yet
    pass(10);
    expect(runs).toBe(1);
    await c.fetch(new Request("http://x/"), null);
    pass(150);
    expect(runs).toBe(1); // back to its size after the collection: the full idle time again
    await c.fetch(new Request("http://x/"), null);
    heap = 200;
    pass(150);
    expect(runs).toBe(1); // grown again, but too soon after the last quick one: light steady traffic pauses often
    pass(5_000);
    expect(runs).toBe(2); // the full idle time collects whatever the spacing
  } finally {
    c.stop();
  }
});

test("quick collections are spaced: a second short pause collects once the spacing has passed", async () => {
  let runs = 0;
  let heap = 100;
  const { collector: c, pass } = onManualClock(ok, {
    idleMs: 60_000,
    quickMs: 30,
    collect: () => ((runs += 1), (heap = 100)),
    heapBytes: () => heap,
  });
  try {
    await c.fetch(new Request("http://x/"), null);
    heap = 160;
    pass(30);
    expect(runs).toBe(1);
    await c.fetch(new Request("http://x/"), null);
    heap = 160;
    pass(4_990); // 4,990 ms after the first quick collection
    expect(runs).toBe(1);
    pass(10);
    expect(runs).toBe(2);
  } finally {
    c.stop();
  }
});
