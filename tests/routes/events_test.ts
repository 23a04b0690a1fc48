import assert from "node:assert/strict";
import { revokeApiKey } from "../../lib/api_keys.ts";
import { setBrand } from "../../lib/brands.ts";
import { errorBody, withContext } from "../test_support.ts";

const SPEC_TYPES = [
  "page_viewed",
  "cart_viewed",
  "checkout_started",
  "checkout_completed",
  "product_viewed",
  "product_added_to_cart",
  "search_submitted",
  "order_created",
  "checkout_abandoned",
  "checkout_recovered",
  "customer_updated",
  "consent_updated",
  "subscription_changed",
  "refund_issued",
  "cart_updated",
  "fulfillment_updated",
  "updateProperties",
  "view",
  "modifyConsent",
];

Deno.test("catalog: 200 with every spec type, sorted by name, and the caller's scope", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    const res = await ctx.request("/cdp/events/types", brand.key);
    assert.equal(res.status, 200);
    assert.ok(res.headers.get("x-request-id"));
    const body = await res.json();
    assert.deepEqual(Object.keys(body).sort(), ["eventTypes", "scope"]);
    assert.equal(body.scope, brand.scope);
    const names: string[] = body.eventTypes.map((t: { name: string }) => t.name);
    for (const name of SPEC_TYPES) assert.ok(names.includes(name), `missing ${name}`);
    assert.deepEqual(names, [...names].sort());
    for (const entry of body.eventTypes) {
      assert.equal(entry.source, "built-in");
      assert.ok(entry.title && entry.description);
      assert.ok(entry.schema.$id.includes(entry.schema.version), entry.schema.$id);
      assert.ok(entry.schema.required.includes("eventType"));
      assert.ok(entry.schema.required.includes("profileId"));
      for (const description of Object.values(entry.schema.properties)) {
        assert.equal(typeof description, "string");
      }
    }
  });
});

Deno.test("catalog: each brand sees its own scope", async () => {
  await withContext(async (ctx) => {
    const a = await ctx.seedBrand();
    const b = await ctx.seedBrand();
    assert.equal((await (await ctx.request("/cdp/events/types", a.key)).json()).scope, a.scope);
    assert.equal((await (await ctx.request("/cdp/events/types", b.key)).json()).scope, b.scope);
  });
});

Deno.test("auth: missing, malformed, unknown and wrong-checksum keys are 401 unauthorized", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    const tampered = brand.key.slice(0, -1) + (brand.key.endsWith("a") ? "b" : "a");
    const cases: [string, Record<string, string>][] = [
      ["no header", {}],
      ["basic scheme", { Authorization: `Basic ${btoa("a:b")}` }],
      ["empty bearer", { Authorization: "Bearer " }],
      ["not svc_", { Authorization: "Bearer sk_live_123" }],
      ["bad checksum", { Authorization: `Bearer ${tampered}` }],
      ["unknown", { Authorization: "Bearer svc_000000000000000000000000000000000000" }],
    ];
    for (const [label, headers] of cases) {
      const res = await ctx.app.request("/cdp/events/types", { headers });
      assert.equal(res.status, 401, label);
      assert.match(res.headers.get("www-authenticate") ?? "", /^Bearer/, label);
      assert.equal((await errorBody(res)).error, "unauthorized", label);
    }
    // The scheme is case-insensitive (RFC 7235).
    const lower = await ctx.app.request("/cdp/events/types", {
      headers: { Authorization: `bearer ${brand.key}` },
    });
    assert.equal(lower.status, 200);
  });
});

Deno.test("auth: revocation applies to the very next request", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    assert.equal((await ctx.request("/cdp/events/types", brand.key)).status, 200);
    await revokeApiKey(ctx.deps, { brandId: brand.brandId, keyId: brand.keyId });
    const res = await ctx.request("/cdp/events/types", brand.key);
    assert.equal(res.status, 401);
    assert.equal((await errorBody(res)).error, "unauthorized");
  });
});

Deno.test("auth: a brand without a storefront integration is 403 forbidden", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand({ shop: null });
    const res = await ctx.request("/cdp/events/types", brand.key);
    assert.equal(res.status, 403);
    assert.equal((await errorBody(res)).error, "forbidden");
  });
});

Deno.test("auth: a disconnected integration keeps the scope for non-commerce routes", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    await setBrand(ctx.deps, { brandId: brand.brandId, integration: "disconnected" });
    const res = await ctx.request("/cdp/events/types", brand.key);
    assert.equal(res.status, 200);
    assert.equal((await res.json()).scope, brand.scope);
  });
});

Deno.test("routing: other methods are 405 with Allow, before authentication", async () => {
  await withContext(async (ctx) => {
    for (const method of ["POST", "PUT", "PATCH", "DELETE"]) {
      const res = await ctx.app.request("/cdp/events/types", { method });
      assert.equal(res.status, 405, method);
      assert.equal(res.headers.get("allow"), "GET, HEAD, OPTIONS");
      assert.equal((await errorBody(res)).error, "method_not_allowed");
    }
  });
});

Deno.test("routing: OPTIONS is a CORS preflight answer; HEAD follows GET", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    const preflight = await ctx.app.request("/cdp/events/types", {
      method: "OPTIONS",
      headers: { Origin: "https://example.com", "Access-Control-Request-Method": "GET" },
    });
    assert.equal(preflight.status, 204);
    assert.equal(preflight.headers.get("access-control-allow-origin"), "*");
    assert.match(preflight.headers.get("access-control-allow-headers") ?? "", /Authorization/);
    const head = await ctx.request("/cdp/events/types", brand.key, { method: "HEAD" });
    assert.equal(head.status, 200);
    assert.equal(await head.text(), "");
  });
});

Deno.test("routing: unknown routes are a JSON 404 with a request id", async () => {
  await withContext(async (ctx) => {
    for (const path of ["/nope", "/cdp/nope", "/cdp/events/types/extra"]) {
      const res = await ctx.app.request(path);
      assert.equal(res.status, 404, path);
      assert.match(res.headers.get("content-type") ?? "", /application\/json/);
      assert.ok(res.headers.get("x-request-id"));
      assert.equal((await errorBody(res)).error, "not_found");
    }
  });
});

Deno.test("request ids: a caller's X-Request-Id is echoed, otherwise one is generated", async () => {
  await withContext(async (ctx) => {
    const echoed = await ctx.app.request("/healthz", { headers: { "X-Request-Id": "abc-123" } });
    assert.equal(echoed.headers.get("x-request-id"), "abc-123");
    await echoed.body?.cancel();
    const a = await ctx.app.request("/healthz");
    const b = await ctx.app.request("/healthz");
    await a.body?.cancel();
    await b.body?.cancel();
    assert.notEqual(a.headers.get("x-request-id"), b.headers.get("x-request-id"));
  });
});

Deno.test("rate limit: the API-wide per-key limit answers 429 with Retry-After", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    const other = await ctx.seedBrand();
    for (let i = 0; i < 3; i++) {
      const res = await ctx.request("/cdp/events/types", brand.key);
      assert.equal(res.status, 200);
      assert.equal(res.headers.get("ratelimit-remaining"), String(2 - i));
      await res.body?.cancel();
    }
    const limited = await ctx.request("/cdp/events/types", brand.key);
    assert.equal(limited.status, 429);
    assert.ok(Number(limited.headers.get("retry-after")) >= 1);
    assert.equal((await errorBody(limited)).error, "rate_limited");
    // Another key has its own budget; the next window resets this one.
    assert.equal((await ctx.request("/cdp/events/types", other.key)).status, 200);
    ctx.clock.advance(60_000);
    assert.equal((await ctx.request("/cdp/events/types", brand.key)).status, 200);
  }, { RATE_LIMIT_PER_MINUTE: "3" });
});

Deno.test("usage: each authenticated request is metered once, whatever its status", async () => {
  await withContext(async (ctx) => {
    const { summarizeUsage } = await import("../../lib/usage.ts");
    const brand = await ctx.seedBrand();
    const noScope = await ctx.seedBrand({ shop: null });
    await (await ctx.request("/cdp/events/types", brand.key)).body?.cancel();
    await (await ctx.request("/cdp/events/types", brand.key)).body?.cancel();
    await (await ctx.request("/cdp/events/types", noScope.key)).body?.cancel();
    await (await ctx.request("/cdp/events/types", null)).body?.cancel();
    const day = ctx.clock.now().toISOString().slice(0, 10);
    assert.deepEqual(await summarizeUsage(ctx.kv, brand.brandId), [
      { day, family: "events", requests: 2 },
    ]);
    assert.deepEqual(await summarizeUsage(ctx.kv, noScope.brandId), [
      { day, family: "events", requests: 1 },
    ]);
    const records = await Array.fromAsync(
      ctx.kv.list({ prefix: ["usage", "requests", brand.brandId] }),
    );
    assert.equal(records.length, 2);
    assert.equal((records[0]!.value as { status: number }).status, 200);
  });
});
