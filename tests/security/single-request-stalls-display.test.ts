/**
 * Outside probe, second round (decision 0196): an object's `display` repeated a long field as
 * often as its type's display expression named it (one object: 6.6 MB; a page of 56: 370 MB and
 * ~900 MB of heap), and every nested form of a linked object carried its whole primary value (an
 * object of 1,000 links: 65 MB, a page of 20: 1.3 GB, past a budget that weighs a link at 100
 * bytes). A display holds at most `MAX_DISPLAY_CHARS`; the answers' sizes are the measure.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { MAX_DISPLAY_CHARS } from "../../src/core/limits";
import { makeTestApp, type TestApp } from "../helpers/app";
import { CO, addField, makeCot } from "../custom-objects/fixtures";

let t: TestApp;
const LONG = 60_000;
const LEAVES = 200;

beforeAll(async () => {
  t = await makeTestApp();
  const echo = await makeCot(t, "echo");
  await addField(t, echo.id, { name: "a", type: "text", primary: true });
  const patched = await t.json("PATCH", `${CO}/custom-object-types/${echo.id}/`, {
    body: { display_expression: "{{ a }}".repeat(70) },
  });
  expect(patched.status).toBe(200);
  expect((await t.json("POST", `${CO}/echo/`, { body: { a: "e".repeat(LONG) } })).status).toBe(201);
  const leaf = await makeCot(t, "leaf");
  await addField(t, leaf.id, { name: "a", type: "text", primary: true });
  for (let i = 0; i < LEAVES; i += 10) {
    const body = Array.from({ length: 10 }, (_, j) => ({ a: `${i + j}${"l".repeat(LONG)}` }));
    expect((await t.json("POST", `${CO}/leaf/`, { body })).status).toBe(201);
  }
  const hub = await makeCot(t, "hub");
  await addField(t, hub.id, { name: "name", type: "text", primary: true });
  await addField(t, hub.id, {
    name: "leaves",
    type: "multiobject",
    related_object_type: "custom_objects.leaf",
  });
  const leaves = Array.from({ length: LEAVES }, (_, i) => i + 1);
  expect((await t.json("POST", `${CO}/hub/`, { body: { name: "h", leaves } })).status).toBe(201);
});
afterAll(() => t.close());

const cut = (ch: string) => `${ch.repeat(MAX_DISPLAY_CHARS - 1)}…`;

describe("a custom object's display holds at most MAX_DISPLAY_CHARS", () => {
  test("an expression naming a long field many times renders it once, cut", async () => {
    const res = await t.req("GET", `${CO}/echo/1/`);
    const text = await res.text();
    expect(res.status).toBe(200);
    // the value once, and a display of its first characters: not 70 copies (4.2 MB)
    expect(text.length).toBeLessThan(LONG + 2_000);
    expect(JSON.parse(text).display).toBe(cut("e"));
    const brief = await t.json("GET", `${CO}/echo/?brief=1`);
    expect(brief.body.results[0].display).toBe(cut("e"));
    const gql = await t.json("POST", "/graphql/", {
      body: { query: "{ custom_objects_echo_list { display } }" },
    });
    expect(gql.body.data.custom_objects_echo_list[0].display).toBe(cut("e"));
  });

  test("nested forms of linked objects carry the cut display, not the whole value", async () => {
    const res = await t.req("GET", `${CO}/hub/1/`);
    const text = await res.text();
    expect(res.status).toBe(200);
    // 200 links of a few hundred bytes each, not 200 values of 60 KB (12 MB)
    expect(text.length).toBeLessThan(LEAVES * 1_000);
    const hub = JSON.parse(text);
    expect(hub.leaves).toHaveLength(LEAVES);
    expect(hub.leaves[0].display).toBe(`0${"l".repeat(MAX_DISPLAY_CHARS - 2)}…`);
    // a short display is as it was
    const short = await t.json("POST", `${CO}/leaf/`, { body: { a: "short" } });
    expect(short.body.display).toBe("short");
  });
});
