/** The operator API's bearer check. */
import assert from "node:assert/strict";
import { Hono } from "hono";
import { adminAuth, tokensEqual } from "../../../lib/http/admin_auth.ts";
import { onError } from "../../../lib/http/errors.ts";
import { testClock, withKv } from "../../test_support.ts";

const TOKEN = "admin-token-0123456789abcdefghijklmnopq";

Deno.test("tokensEqual: equal only when identical, whatever the lengths", async () => {
  assert.equal(await tokensEqual(TOKEN, TOKEN), true);
  for (const other of ["", TOKEN.slice(0, -1), `${TOKEN}q`, TOKEN.toUpperCase(), ` ${TOKEN}`]) {
    assert.equal(await tokensEqual(other, TOKEN), false, JSON.stringify(other));
  }
});

/** An app behind adminAuth whose requests come from the `x-source` header. */
function guarded(kv: Deno.Kv, failuresPerMinute: number) {
  const clock = testClock();
  const app = new Hono().use(adminAuth({
    token: TOKEN,
    kv,
    now: clock.now,
    failuresPerMinute,
    source: (c) => c.req.header("x-source") ?? "nowhere",
  })).get("/", (c) => c.text("in"));
  app.onError(onError);
  const ask = (authorization?: string, source = "203.0.113.7") =>
    app.request("/", {
      headers: { "x-source": source, ...(authorization === undefined ? {} : { authorization }) },
    });
  return { ask, clock };
}

Deno.test("adminAuth: a bearer of the token passes; anything else is 401 with a challenge", async () => {
  await withKv(async (kv) => {
    const { ask } = guarded(kv, 100);
    assert.equal(await (await ask(`Bearer ${TOKEN}`)).text(), "in");
    assert.equal((await ask(`bearer  ${TOKEN}`)).status, 200);
    for (
      const header of [undefined, TOKEN, `Basic ${TOKEN}`, `Bearer ${TOKEN} extra`, "Bearer "]
    ) {
      const res = await ask(header);
      assert.equal(res.status, 401, String(header));
      assert.match(res.headers.get("www-authenticate") ?? "", /^Bearer realm="admin"/);
      assert.equal((await res.json()).error, "unauthorized");
    }
  });
});

Deno.test("adminAuth: failures are limited per source; the right token passes even then", async () => {
  await withKv(async (kv) => {
    const { ask, clock } = guarded(kv, 3);
    for (let i = 0; i < 3; i++) assert.equal((await ask("Bearer guess")).status, 401);
    const limited = await ask("Bearer guess");
    assert.equal(limited.status, 429);
    assert.equal((await limited.json()).error, "rate_limited");
    assert.ok(Number(limited.headers.get("retry-after")) >= 1);
    // The operator, from the very same source, is never refused for those failures.
    for (let i = 0; i < 5; i++) assert.equal((await ask(`Bearer ${TOKEN}`)).status, 200);
    // Another source's failures are its own.
    assert.equal((await ask("Bearer guess", "198.51.100.2")).status, 401);
    clock.advance(60_000);
    assert.equal((await ask("Bearer guess")).status, 401);
  });
});
