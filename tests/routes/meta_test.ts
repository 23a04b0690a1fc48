import { Validator } from "@seriousme/openapi-schema-validator";
import assert from "node:assert/strict";
import { errorBody, withContext } from "../test_support.ts";

Deno.test("openapi: /openapi.json validates as OpenAPI 3.1 and documents every route", async () => {
  await withContext(async (ctx) => {
    const res = await ctx.app.request("/openapi.json");
    assert.equal(res.status, 200);
    const doc = await res.json();
    const validator = new Validator();
    const result = await validator.validate(doc);
    assert.deepEqual(result, { valid: true });
    assert.equal(validator.version, "3.1");
    assert.equal(doc.openapi, "3.1.0");
    const catalog = doc.paths["/cdp/events/types"].get;
    assert.deepEqual(catalog.security, [{ apiKey: [] }]);
    assert.ok(catalog.responses["200"] && catalog.responses["401"] && catalog.responses["405"]);
    assert.equal(doc.components.securitySchemes.apiKey.scheme, "bearer");
    assert.ok(doc.components.schemas.Error);
    assert.ok(doc.paths["/healthz"].get);
    assert.ok(doc.paths["/readyz"].get);
  });
});

interface Operation {
  operationId?: string;
  parameters?: { name: string; example?: unknown; schema?: { example?: unknown } }[];
  requestBody?: { content: Record<string, { example?: unknown }> };
  responses: Record<string, { content?: Record<string, { example?: unknown }> }>;
}

/** Every operation of a document, as `METHOD path` and its object. */
function operations(doc: { paths: Record<string, Record<string, unknown>> }) {
  const methods = ["get", "put", "post", "delete", "patch", "head", "options"];
  return Object.entries(doc.paths).flatMap(([path, item]) =>
    Object.entries(item).filter(([method]) => methods.includes(method))
      .map(([method, op]) => [`${method.toUpperCase()} ${path}`, op as Operation] as const)
  );
}

Deno.test("openapi: every operation has a camelCase operationId, request and response examples; servers are set", async () => {
  await withContext(async (ctx) => {
    // The operator document: every public operation and the operator API.
    const doc = await (await ctx.app.request("/openapi.json?admin=1")).json();
    assert.deepEqual(doc.servers, [{ url: "/", description: "This service" }]);
    const ops = operations(doc);
    assert.ok(ops.length >= 30, `only ${ops.length} operations`);
    const ids = new Set<string>();
    for (const [where, op] of ops) {
      assert.match(op.operationId ?? "", /^[a-z][a-zA-Z0-9]*$/, `${where}: operationId`);
      assert.ok(!ids.has(op.operationId!), `${where}: operationId ${op.operationId} repeated`);
      ids.add(op.operationId!);
      for (const param of op.parameters ?? []) {
        assert.ok(
          param.example !== undefined || param.schema?.example !== undefined,
          `${where}: parameter ${param.name} has no example`,
        );
      }
      for (const [type, media] of Object.entries(op.requestBody?.content ?? {})) {
        assert.ok(media.example !== undefined, `${where}: ${type} request body has no example`);
      }
      for (const [status, response] of Object.entries(op.responses)) {
        for (const [type, media] of Object.entries(response.content ?? {})) {
          assert.ok(media.example !== undefined, `${where}: ${status} ${type} has no example`);
        }
      }
    }
    // The names generated clients get: stable, so a rename is a breaking change seen here.
    for (
      const id of ["ingestEvents", "listEventTypes", "getProfile", "listProfiles", "defineSegment"]
    ) {
      assert.ok(ids.has(id), id);
    }
    assert.ok(ids.has("runAdminCommand"));
  }, { ADMIN_TOKEN: "meta-test-admin-token-0123456789abcdefg" });
});

Deno.test("docs: /docs serves the interactive reference page without third-party scripts", async () => {
  await withContext(async (ctx) => {
    const res = await ctx.app.request("/docs");
    assert.equal(res.status, 200);
    assert.match(res.headers.get("content-type") ?? "", /text\/html/);
    const html = await res.text();
    assert.match(html, /fetch\("\/openapi\.json"\)/);
    assert.doesNotMatch(html, /<script[^>]+src=/);
  });
});

Deno.test("healthz: ok when both stores answer, 503 envelope when the database is gone", async () => {
  await withContext(async (ctx) => {
    const ok = await ctx.app.request("/healthz");
    assert.equal(ok.status, 200);
    assert.deepEqual(await ok.json(), { status: "ok" });
    await ctx.sql.end();
    const down = await ctx.app.request("/healthz");
    assert.equal(down.status, 503);
    assert.equal((await errorBody(down)).error, "service_unavailable");
  });
});

Deno.test("readyz: ready when both stores answer and every migration is applied, 503 otherwise", async () => {
  await withContext(async (ctx) => {
    const ok = await ctx.app.request("/readyz");
    assert.equal(ok.status, 200);
    assert.deepEqual(await ok.json(), { status: "ready" });
    const [last] = await ctx.sql<{ version: number }[]>`
      delete from schema_migrations
      where version = (select max(version) from schema_migrations) returning version`;
    const pending = await ctx.app.request("/readyz");
    assert.equal(pending.status, 503);
    assert.equal(pending.headers.get("Retry-After"), "5");
    const body = await errorBody(pending);
    assert.equal(body.error, "service_unavailable");
    assert.match(body.error_description, new RegExp(`migrations not applied: ${last!.version}\\b`));
    await ctx.sql.end();
    const gone = await ctx.app.request("/readyz");
    assert.equal(gone.status, 503);
    assert.equal((await errorBody(gone)).error, "service_unavailable");
  });
});
