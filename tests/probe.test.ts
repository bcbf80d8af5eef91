import { test } from "bun:test";
import { appOn } from "./helpers/remote-db";
import { addField, CO, makeCot } from "./custom-objects/fixtures";
const SCHEMA = `${CO}/schema`;
for (const backend of ["local", "remote"] as const)
  test(`probe ${backend}`, async () => {
    const on = await appOn(backend, "probe");
    const t = on.t;
    const home = {
      id: 2,
      name: "home",
      type: "object",
      related_object_type: "dcim/site",
      related_name: "x",
    };
    const code = { id: 1, name: "code", type: "text" };
    const doc = (fields: unknown[], removed: unknown[] = []) => ({
      schema: {
        schema_version: "1",
        types: [
          {
            name: "pa",
            slug: "pa",
            fields,
            ...(removed.length ? { removed_fields: removed } : {}),
          },
        ],
      },
      allow_destructive: true,
    });
    console.log(
      "made",
      (await t.json("POST", `${SCHEMA}/apply/`, { body: doc([code, home]) })).status,
    );
    console.log("obj", (await t.json("POST", `${CO}/pa/`, { body: { code: "a" } })).status);
    const rm = await t.json("POST", `${SCHEMA}/apply/`, {
      body: doc([code], [{ id: 2, name: "home" }]),
    });
    console.log("removed", rm.status, JSON.stringify(rm.body).slice(0, 200));
    const b = await makeCot(t, "pb");
    await addField(t, b.id, {
      name: "base",
      type: "object",
      related_object_type: "dcim.site",
      related_name: "x",
    });
    const trash = await t.json("GET", `${SCHEMA}/trash/`);
    const entry = trash.body.results?.[0];
    console.log("entry", entry?.id, entry?.kind);
    if (entry) {
      const r = await t.json("POST", `${SCHEMA}/trash/${entry.id}/restore/`);
      console.log("restore", r.status, JSON.stringify(r.body).slice(0, 400));
    }
    const holders = await t.json("GET", `${CO}/custom-object-type-fields/?related_name=x`);
    console.log("holders", holders.body.count);
    await on.close();
  });
