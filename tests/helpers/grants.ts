/** A user with object permissions (`[actions, "app_label.model", constraints]`) and a token. */
import { createUser, issueToken } from "../../src/core/auth/provisioning";
import type { TestApp } from "./app";

export async function userWith(
  app: TestApp,
  username: string,
  grants: Array<[string[], string, unknown]>,
  opts: { writeEnabled?: boolean; expires?: string } = {},
): Promise<{ token: string; id: number }> {
  const u = await createUser(app.deps.db.orm, { username });
  for (const [i, [actions, label, constraints]] of grants.entries()) {
    const r = await app.json("POST", "/api/users/permissions/", {
      body: {
        name: `${username}-${i}`,
        actions,
        object_types: [label],
        users: [u.id],
        constraints,
      },
    });
    if (r.status !== 201) throw new Error(JSON.stringify(r.body));
  }
  const token = await issueToken(app.deps.db.orm, { username, ...opts });
  return { token: token.key, id: u.id };
}
