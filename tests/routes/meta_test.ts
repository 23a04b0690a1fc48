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
