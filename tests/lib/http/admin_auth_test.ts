/** The operator API's bearer check. */
import assert from "node:assert/strict";
import { Hono } from "hono";
import { adminAuth, tokensEqual } from "../../../lib/http/admin_auth.ts";
import { onError } from "../../../lib/http/errors.ts";

const TOKEN = "admin-token-0123456789abcdefghijklmnopq";

Deno.test("tokensEqual: equal only when identical, whatever the lengths", async () => {
  assert.equal(await tokensEqual(TOKEN, TOKEN), true);
  for (const other of ["", TOKEN.slice(0, -1), `${TOKEN}q`, TOKEN.toUpperCase(), ` ${TOKEN}`]) {
    assert.equal(await tokensEqual(other, TOKEN), false, JSON.stringify(other));
  }
});

Deno.test("adminAuth: a bearer of the token passes; anything else is 401 with a challenge", async () => {
  const app = new Hono().use(adminAuth(TOKEN)).get("/", (c) => c.text("in"));
  app.onError(onError);
  const ask = (authorization?: string) =>
    app.request("/", authorization === undefined ? {} : { headers: { authorization } });
  assert.equal(await (await ask(`Bearer ${TOKEN}`)).text(), "in");
  assert.equal((await ask(`bearer  ${TOKEN}`)).status, 200);
  for (const header of [undefined, TOKEN, `Basic ${TOKEN}`, `Bearer ${TOKEN} extra`, "Bearer "]) {
    const res = await ask(header);
    assert.equal(res.status, 401, String(header));
    assert.match(res.headers.get("www-authenticate") ?? "", /^Bearer realm="admin"/);
    assert.equal((await res.json()).error, "unauthorized");
  }
});
