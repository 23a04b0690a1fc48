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
