/** The custom objects plugin: user-defined object types with a REST endpoint each. */
import { Hono } from "hono";
import type { HonoEnv } from "../../core/context";
import type { HostPlugin } from "../types";

export const customObjectsPlugin: HostPlugin = {
  name: "custom_objects",
  version: "0.1.0",
  apiBase: "custom-objects",
  objectTypes: [
    { appLabel: "custom_objects", model: "customobjecttype" },
    { appLabel: "custom_objects", model: "customobjecttypefield" },
  ],
  apiRoutes: () => {
    const app = new Hono<HonoEnv>();
    app.get("/", (c) => c.json({}));
    return app;
  },
};
