import assert from "node:assert/strict";
import { createRoute, z } from "@hono/zod-openapi";
import { HttpError, onError } from "../../../lib/http/errors.ts";
import { newRouter } from "../../../lib/http/openapi.ts";
import {
  assertWithinWindow,
  DEFAULT_LIMIT,
  limitParam,
  MAX_LIMIT,
  OFFSET_WINDOW,
  offsetPage,
  pageEnvelope,
  pageQuery,
} from "../../../lib/http/pagination.ts";
import { errorBody } from "../../test_support.ts";

function pagingApp() {
  const app = newRouter();
  app.onError(onError);
  const list = createRoute({
    method: "get",
    path: "/items",
    request: { query: pageQuery },
    responses: {
      200: {
        description: "The parsed query",
        content: {
          "application/json": { schema: z.object({ limit: z.number(), offset: z.number() }) },
        },
      },
    },
  });
  app.openapi(list, (c) => c.json(c.req.valid("query"), 200));
  const Body = z.object({
    name: z.string().min(1),
    count: z.number().int(),
    tags: z.array(z.string()),
  });
  const create = createRoute({
    method: "post",
    path: "/items",
    request: { body: { content: { "application/json": { schema: Body } }, required: true } },
    responses: {
      200: { description: "The parsed body", content: { "application/json": { schema: Body } } },
    },
  });
  app.openapi(create, (c) => c.json(c.req.valid("json"), 200));
  return app;
}

function postJson(app: ReturnType<typeof pagingApp>, body: string) {
  return app.request("/items", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body,
  });
}

Deno.test("pagination: constants match the contract", () => {
  assert.equal(OFFSET_WINDOW, 10_000);
  assert.equal(DEFAULT_LIMIT, 25);
  assert.equal(MAX_LIMIT, 100);
});

Deno.test("assertWithinWindow: offset + limit may reach 10,000 but not pass it", () => {
  assertWithinWindow({ offset: 9_975, limit: 25 });
  assertWithinWindow({ offset: 0, limit: 100 });
  assertWithinWindow({ offset: 9_900, limit: 100 });
  for (const page of [{ offset: 9_976, limit: 25 }, { offset: 10_000, limit: 1 }]) {
    assert.throws(
      () => assertWithinWindow(page),
      (err: unknown) =>
        err instanceof HttpError && err.status === 400 && err.code === "bad_request" &&
        /cursor/.test(err.message),
      JSON.stringify(page),
    );
  }
});

Deno.test("pageEnvelope: caps totalSize at the window unless capTotal is false", () => {
  const list = [{ id: 1 }, { id: 2 }, { id: 3 }];
  assert.deepEqual(pageEnvelope({ list, totalSize: 25_000, offset: 50, limit: 25 }), {
    list,
    totalSize: 10_000,
    offset: 50,
    pageSize: 25,
    nextCursor: null,
  });
  assert.equal(pageEnvelope({ list, totalSize: 3, offset: 0, limit: 25 }).totalSize, 3);
  assert.equal(
    pageEnvelope({ list, totalSize: 25_000, offset: 0, limit: 25, capTotal: false }).totalSize,
    25_000,
  );
  assert.equal(
    pageEnvelope({ list, totalSize: 10_000, offset: 0, limit: 25, capTotal: true }).totalSize,
    10_000,
  );
});

Deno.test("pageEnvelope: pageSize is the limit, nextCursor defaults to null", () => {
  const page = pageEnvelope({ list: ["a"], totalSize: 1, offset: 0, limit: 40 });
  assert.equal(page.pageSize, 40);
  assert.equal(page.nextCursor, null);
  assert.deepEqual(Object.keys(page).sort(), [
    "list",
    "nextCursor",
    "offset",
    "pageSize",
    "totalSize",
  ]);
  const next = pageEnvelope({ list: [], totalSize: 0, offset: 0, limit: 25, nextCursor: "c1_x" });
  assert.equal(next.nextCursor, "c1_x");
  assert.equal(
    pageEnvelope({ list: [], totalSize: 0, offset: 0, limit: 25, nextCursor: null }).nextCursor,
    null,
  );
});

Deno.test("pageQuery: defaults to limit 25, offset 0; clamps limit to 100", async () => {
  const app = pagingApp();
  const cases: [string, { limit: number; offset: number }][] = [
    ["", { limit: 25, offset: 0 }],
    ["?limit=1", { limit: 1, offset: 0 }],
    ["?limit=100&offset=40", { limit: 100, offset: 40 }],
    ["?limit=101", { limit: 100, offset: 0 }],
    ["?limit=500", { limit: 100, offset: 0 }],
    ["?offset=9975", { limit: 25, offset: 9975 }],
  ];
  for (const [query, expected] of cases) {
    const res = await app.request(`/items${query}`);
    assert.equal(res.status, 200, query);
    assert.deepEqual(await res.json(), expected, query);
  }
});

Deno.test("pageQuery: invalid limit or offset → 400 bad_request naming the parameter", async () => {
  const app = pagingApp();
  const cases: [string, string][] = [
    ["?limit=0", "query.limit"],
    ["?limit=-1", "query.limit"],
    ["?limit=abc", "query.limit"],
    ["?limit=2.5", "query.limit"],
    ["?offset=-1", "query.offset"],
    ["?offset=abc", "query.offset"],
  ];
  for (const [query, path] of cases) {
    const res = await app.request(`/items${query}`);
    assert.equal(res.status, 400, query);
    const body = await errorBody(res);
    assert.equal(body.error, "bad_request", query);
    assert.ok(body.error_description.includes(path), `${query}: ${body.error_description}`);
  }
  const both = await errorBody(await app.request("/items?limit=0&offset=-1"));
  assert.match(both.error_description, /query\.limit/);
  assert.match(both.error_description, /query\.offset/);
});

Deno.test("json body: valid input is parsed", async () => {
  const res = await postJson(pagingApp(), JSON.stringify({ name: "a", count: 2, tags: ["x"] }));
  assert.equal(res.status, 200);
  assert.deepEqual(await res.json(), { name: "a", count: 2, tags: ["x"] });
});

Deno.test("json body: malformed JSON → 400 bad_request envelope", async () => {
  const app = pagingApp();
  for (const raw of ["{", "{name: 1}", "not json", '{"name": "a",}']) {
    const res = await postJson(app, raw);
    assert.equal(res.status, 400, raw);
    const body = await errorBody(res);
    assert.equal(body.error, "bad_request", raw);
    assert.ok(body.error_description.length > 0);
  }
});

Deno.test("json body: wrong types → 400 naming body.<field>", async () => {
  const app = pagingApp();
  const res = await postJson(app, JSON.stringify({ name: 5, count: "two", tags: ["x", 3] }));
  assert.equal(res.status, 400);
  const body = await errorBody(res);
  assert.equal(body.error, "bad_request");
  for (const path of ["body.name", "body.count", "body.tags.1"]) {
    assert.ok(body.error_description.includes(path), body.error_description);
  }
  const missing = await errorBody(await postJson(app, JSON.stringify({ name: "a" })));
  assert.match(missing.error_description, /body\.count/);
  assert.match(missing.error_description, /body\.tags/);
  // A non-object body has no field path: it is named as the body itself.
  const array = await errorBody(await postJson(app, "[]"));
  assert.match(array.error_description, /^body: /);
});

Deno.test("json body: a required JSON body sent without a JSON Content-Type → 415 envelope", async () => {
  const app = pagingApp();
  const valid = JSON.stringify({ name: "a", count: 2, tags: [] });
  for (const headers of [new Headers(), new Headers({ "Content-Type": "text/plain" })]) {
    const res = await app.request("/items", { method: "POST", body: valid, headers });
    assert.equal(res.status, 415);
    assert.equal((await errorBody(res)).error, "unsupported_media_type");
  }
  const charset = await app.request("/items", {
    method: "POST",
    body: valid,
    headers: { "Content-Type": "application/json; charset=utf-8" },
  });
  assert.equal(charset.status, 200);
  await charset.body?.cancel();
});

Deno.test("offsetPage: a lib result as an offset page, total capped, never a cursor", () => {
  assert.deepEqual(offsetPage({ list: ["a", "b"], total: 12_345 }, { offset: 20, limit: 2 }), {
    list: ["a", "b"],
    totalSize: OFFSET_WINDOW,
    offset: 20,
    pageSize: 2,
    nextCursor: null,
  });
});

Deno.test("limitParam with clampLow: below 1 is 1, above max is max; a non-integer is 400", async () => {
  const app = newRouter();
  app.onError(onError);
  app.openapi(
    createRoute({
      method: "get",
      path: "/export",
      request: { query: z.object({ limit: limitParam(10_000, 10_000, { clampLow: true }) }) },
      responses: {
        200: {
          description: "The parsed limit",
          content: { "application/json": { schema: z.object({ limit: z.number() }) } },
        },
      },
    }),
    (c) => c.json({ limit: c.req.valid("query").limit }, 200),
  );
  const cases: [string, number][] = [
    ["", 10_000],
    ["?limit=0", 1],
    ["?limit=-3", 1],
    ["?limit=1", 1],
    ["?limit=9999", 9999],
    ["?limit=10001", 10_000],
  ];
  for (const [query, limit] of cases) {
    const res = await app.request(`/export${query}`);
    assert.equal(res.status, 200, query);
    assert.deepEqual(await res.json(), { limit }, query);
  }
  for (const bad of ["?limit=abc", "?limit=2.5"]) {
    const res = await app.request(`/export${bad}`);
    assert.equal(res.status, 400, bad);
    assert.match((await errorBody(res)).error_description, /query\.limit/);
  }
});
