import assert from "node:assert/strict";
import { Hono } from "hono";
import { onError, onNotFound } from "../../../lib/http/errors.ts";
import { routeGuard, storableText } from "../../../lib/http/route_guard.ts";
import { errorBody } from "../../test_support.ts";

/** A small app with the guard in front of a few routes; `reached` counts handler calls. */
function guardedApp() {
  const app = new Hono();
  const reached = { count: 0 };
  app.onError(onError);
  app.notFound(onNotFound);
  app.use(routeGuard(app));
  const handler = (c: { json: (v: unknown) => Response }) => {
    reached.count++;
    return c.json({ ok: true });
  };
  app.get("/items", handler);
  app.post("/items", handler);
  app.get("/items/:id", handler);
  app.delete("/items/:id", handler);
  app.put("/things/:id", handler);
  return { app, reached };
}

Deno.test("routeGuard: an unknown path is 404 before any handler", async () => {
  const { app, reached } = guardedApp();
  const res = await app.request("/nowhere");
  assert.equal(res.status, 404);
  const body = await errorBody(res);
  assert.equal(body.error, "not_found");
  assert.equal(body.error_description, "No route for GET /nowhere");
  assert.equal((await app.request("/items/1/deeper", { method: "POST" })).status, 404);
  assert.equal(reached.count, 0);
});

Deno.test("routeGuard: a known path asked with another method is 405 with Allow", async () => {
  const { app, reached } = guardedApp();
  const res = await app.request("/items/7", { method: "POST" });
  assert.equal(res.status, 405);
  assert.equal(res.headers.get("Allow"), "GET, DELETE, HEAD, OPTIONS");
  assert.equal((await errorBody(res)).error, "method_not_allowed");
  const put = await app.request("/things/1", { method: "GET" });
  assert.equal(put.status, 405);
  // No GET: no HEAD either.
  assert.equal(put.headers.get("Allow"), "PUT, OPTIONS");
  assert.equal(reached.count, 0);
  assert.equal((await app.request("/items/7", { method: "DELETE" })).status, 200);
  assert.equal((await app.request("/items", { method: "POST" })).status, 200);
  assert.equal(reached.count, 2);
});

Deno.test("routeGuard: a NUL in the path or query is 400", async () => {
  const { app, reached } = guardedApp();
  for (
    const [url, where] of [
      ["/items/a%00b", "the path"],
      ["/items?x=%00", 'query parameter "x"'],
      ["/items?%00=1", "a query parameter name"],
    ] as const
  ) {
    const res = await app.request(url);
    assert.equal(res.status, 400, url);
    const body = await errorBody(res);
    assert.equal(body.error, "bad_request");
    assert.match(
      body.error_description,
      new RegExp(`^${where.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")} must not`),
    );
  }
  assert.equal(reached.count, 0);
  // Other escapes pass: a space, an emoji, bytes that are not UTF-8 (a surrogate's among them:
  // they stay encoded, plain ASCII).
  for (
    const url of [
      "/items/a%20b",
      "/items/%F0%9F%98%80",
      "/items/%FF",
      "/items/%ED%A0%80",
      "/items?q=%C3%A9",
    ]
  ) {
    assert.equal((await app.request(url)).status, 200, url);
  }
  assert.equal(reached.count, 5);
});

Deno.test("storableText: NUL and unpaired surrogates are not storable", () => {
  assert.equal(storableText("plain é 😀"), true);
  assert.equal(storableText("a\0b"), false);
  assert.equal(storableText("\uD800"), false);
  assert.equal(storableText("\uDC00x"), false);
});
