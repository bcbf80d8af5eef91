/**
 * The D1 test app when miniflare's workerd goes away under it (killed by another process on a
 * shared machine, or crashed): the requests that follow fail naming how workerd ended, not as a
 * run of bare 500s. One fresh-clone run saw seven D1 tests answer 500 one after another, each
 * in about 2 ms, with nothing logged: the shape of a workerd gone (ECONNREFUSED on every call).
 */
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import { type D1App, startD1App } from "../helpers/d1-app";
import { waitFor } from "../helpers/wait";

// wrangler's migration run takes 10–30 s on a busy machine
setDefaultTimeout(120_000);

const TYPES = "/api/plugins/custom-objects/custom-object-types/";
let d1: D1App;
beforeAll(async () => {
  d1 = await startD1App("workerd-gone");
});
afterAll(() => d1?.stop());

test("a request after workerd was stopped from outside fails naming how it ended, not as a bare 500", async () => {
  expect((await d1.json("POST", TYPES, { name: "before", slug: "before" })).status).toBe(201);
  expect(d1.workerd.ended()).toBeNull();
  const pid = d1.workerd.pid;
  expect(pid).toBeNumber();
  // what `pkill workerd` sends (its default); workerd answers it by exiting 0, printing nothing
  process.kill(pid!, "SIGTERM");
  await waitFor(() => d1.workerd.ended(), { message: "workerd's exit noticed" });
  expect(d1.workerd.ended()).toContain(`pid ${pid}`);
  const after = d1.json("POST", TYPES, { name: "after", slug: "after" });
  await expect(after).rejects.toThrow(
    /500: miniflare's workerd \(pid \d+, workerd-gone\) exited with code 0 \(as it does on a SIGTERM\)/,
  );
});
