/**
 * The OpenAPI texts kept per visibility set (decisions 0205, 0210), raced (probe of 0213): two
 * callers with different views of the custom object types ask for the JSON and YAML documents,
 * each from its own origin, while schema changes add types neither may view. No answer carries a
 * type its caller may not view, another origin's `servers`, or a `Content-Length` other than its
 * body's; each caller's answers name the types it may view.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { makeTestApp, type TestApp } from "../helpers/app";
import { userWith } from "../helpers/grants";
import { addField, makeCot, namedCot } from "../custom-objects/fixtures";

let t: TestApp;
let wide = "";
let narrow = "";
beforeAll(async () => {
  t = await makeTestApp();
  await namedCot(t, "sharedcrates");
  await namedCot(t, "widecrates");
  const view = (slug: string): [string[], string, unknown] => [
    ["view"],
    `custom_objects.${slug}`,
    null,
  ];
  wide = (await userWith(t, "wide-viewer", [view("sharedcrates"), view("widecrates")])).token;
  narrow = (await userWith(t, "narrow-viewer", [view("sharedcrates")])).token;
});
afterAll(() => t.close());

/** One caller's document from its own origin: the checks every answer must pass. */
async function documentOf(token: string, origin: string, format: "json" | "yaml") {
  const r = await t.app.request(`http://${origin}/api/schema/?format=${format}`, {
    headers: { authorization: `Token ${token}` },
  });
  expect(r.status).toBe(200);
  const body = await r.text();
  expect(Number(r.headers.get("content-length"))).toBe(Buffer.byteLength(body));
  return body;
}

test("each caller's documents hold its own view and origin while types are added", async () => {
  const added: string[] = [];
  for (let round = 0; round < 6; round++) {
    const slug = `racedsecret${round}`;
    // the change and the four reads started together: reads land before, during and after it
    const change = (async () => {
      const cot = await makeCot(t, slug);
      await addField(t, cot.id, { name: "name", type: "text", primary: true });
    })();
    const reads = (["json", "yaml"] as const).flatMap((format) => [
      documentOf(wide, "wide.example.test", format).then((text) => ({ who: "wide", text })),
      documentOf(narrow, "narrow.example.test", format).then((text) => ({ who: "narrow", text })),
    ]);
    const [answers] = await Promise.all([Promise.all(reads), change]);
    added.push(slug);
    for (const { who, text } of answers) {
      for (const secret of added) expect(text.includes(secret), `${who} ${secret}`).toBe(false);
      expect(text).toContain("sharedcrates");
      expect(text.includes("widecrates"), who).toBe(who === "wide");
      expect(text).toContain(`${who}.example.test`);
      expect(text).not.toContain(`${who === "wide" ? "narrow" : "wide"}.example.test`);
    }
  }
  // the superuser's document names every type added
  const all = await documentOf(t.admin, "admin.example.test", "json");
  for (const slug of added) expect(all).toContain(slug);
});
