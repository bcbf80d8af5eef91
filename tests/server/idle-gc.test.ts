/**
 * The idle collection of the Bun server (decision 0060): one full collection once the server has
 * been quiet for a while after serving requests; never while one is in flight, never on a
 * server that served nothing since the last one.
 */
import { expect, test } from "bun:test";
import { heapStats } from "bun:jsc";
import { idleCollector } from "../../src/idle-gc";

const ok = () => new Response("ok");

test("one collection after a burst, once the server has been idle; none before any request", async () => {
  let runs = 0;
  const c = idleCollector(ok, { idleMs: 40, collect: () => runs++ });
  try {
    await Bun.sleep(120);
    expect(runs).toBe(0); // nothing served yet
    for (let i = 0; i < 5; i++) await c.fetch(new Request("http://x/"), null);
    await Bun.sleep(15);
    expect(runs).toBe(0); // not idle long enough
    await Bun.sleep(120);
    expect(runs).toBe(1);
    await Bun.sleep(120);
    expect(runs).toBe(1); // still quiet: nothing new to collect
    await c.fetch(new Request("http://x/"), null);
    await Bun.sleep(120);
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
  const c = idleCollector(slow, { idleMs: 30, collect: () => runs++ });
  try {
    const answer = c.fetch(new Request("http://x/"), null);
    await Bun.sleep(150);
    expect(runs).toBe(0);
    finish();
    expect(await (await answer).text()).toBe("late");
    await Bun.sleep(100);
    expect(runs).toBe(1);
  } finally {
    c.stop();
  }
});

test("a handler that throws is counted out too", async () => {
  let runs = 0;
  const c = idleCollector(
    () => {
      throw new Error("boom");
    },
    { idleMs: 30, collect: () => runs++ },
  );
  try {
    expect(() => c.fetch(new Request("http://x/"), null)).toThrow("boom");
    await Bun.sleep(100);
    expect(runs).toBe(1);
  } finally {
    c.stop();
  }
});

test("the default collection is a real full one: garbage left by a burst is gone after it", async () => {
  const c = idleCollector(
    () =>
      new Response(JSON.stringify(Array.from({ length: 20_000 }, (_, i) => ({ i, s: `v${i}` })))),
    { idleMs: 30 },
  );
  try {
    for (let i = 0; i < 20; i++) await (await c.fetch(new Request("http://x/"), null)).text();
    const before = heapStats().heapSize;
    await Bun.sleep(150);
    expect(c.collections).toBe(1);
    expect(heapStats().heapSize).toBeLessThan(before);
  } finally {
    c.stop();
  }
});

test("a short pause is enough once the heap has grown by half since the last collection", async () => {
  let runs = 0;
  let heap = 100;
  const c = idleCollector(ok, {
    idleMs: 1000,
    quickMs: 30,
    collect: () => ((runs += 1), (heap = 100)),
    heapBytes: () => heap,
  });
  try {
    await c.fetch(new Request("http://x/"), null);
    heap = 140; // grown, but not by half
    await Bun.sleep(150);
    expect(runs).toBe(0); // a short pause only: the full idle time has not passed
    await c.fetch(new Request("http://x/"), null);
    heap = 160;
    await Bun.sleep(150);
    expect(runs).toBe(1);
    await c.fetch(new Request("http://x/"), null);
    await Bun.sleep(150);
    expect(runs).toBe(1); // back to its size after the collection: the full idle time again
    await c.fetch(new Request("http://x/"), null);
    heap = 200;
    await Bun.sleep(150);
    expect(runs).toBe(1); // grown again, but too soon after the last quick one: light steady traffic pauses often
  } finally {
    c.stop();
  }
});
