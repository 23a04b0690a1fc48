/** The pipeline createApp builds: request ids, security headers, brand-wide throttle ceilings. */
import assert from "node:assert/strict";
import type { UsageRecord } from "../../lib/http/usage.ts";
import { SECURITY_HEADERS } from "../../lib/http/security_headers.ts";
import type { LogLevel } from "../../lib/log.ts";
import { usageRecordsOfBrandPrefix } from "../../lib/store/kv_keys.ts";
import { issueApiKey } from "../../lib/tenancy/api_keys.ts";
import { errorBody, type TestContext, withContext } from "../test_support.ts";
import { APP_ENV, openDashboard } from "./app_pages/dashboard_fixture.ts";

/** Another key of the seeded brand. */
async function anotherKey(ctx: TestContext, brandId: string): Promise<string> {
  return (await issueApiKey(ctx.deps, { brandId })).key;
}

async function status(res: Response | Promise<Response>): Promise<number> {
  const answered = await res;
  await answered.body?.cancel();
  return answered.status;
}

Deno.test("request ids: three requests with one X-Request-Id are three usage records, the caller's id kept apart", async () => {
  const lines: Record<string, unknown>[] = [];
  const log = (_level: LogLevel, message: string, fields: Record<string, unknown> = {}) => {
    if (message === "request") lines.push(fields);
  };
  await withContext(
    async (ctx) => {
      const brand = await ctx.seedBrand();
      const answered: string[] = [];
      for (let i = 0; i < 3; i++) {
        const res = await ctx.request("/cdp/events/types", brand.key, {
          headers: { "X-Request-Id": "same-id" },
        });
        assert.equal(res.status, 200);
        await res.body?.cancel();
        answered.push(res.headers.get("x-request-id")!);
      }
      assert.equal(new Set(answered).size, 3);
      assert.ok(!answered.includes("same-id"));
      const records = await Array.fromAsync(
        ctx.kv.list<UsageRecord>({ prefix: usageRecordsOfBrandPrefix(brand.brandId) }),
      );
      assert.equal(records.length, 3);
      assert.deepEqual(records.map((r) => r.value.request_id).sort(), [...answered].sort());
      assert.ok(records.every((r) => r.value.client_request_id === "same-id"));
      // The log correlates by the server's id; the caller's rides along.
      assert.deepEqual(lines.map((line) => line.request_id), answered);
      assert.ok(lines.every((line) => line.client_request_id === "same-id"));
      // An id unsafe to log is not kept.
      await status(ctx.request("/cdp/events/types", brand.key, {
        headers: { "X-Request-Id": "bad id\u00e9" },
      }));
      assert.equal(lines.at(-1)!.client_request_id, undefined);
    },
    {},
    { log },
  );
});

Deno.test("security headers: HSTS and nosniff on every answer; the dashboard keeps its framing", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    const s = await openDashboard(ctx, brand.scope!);
    const answers: [string, Response][] = [
      ["200 json", await ctx.request("/cdp/events/types", brand.key)],
      ["401", await ctx.request("/cdp/events/types", null)],
      ["404", await ctx.app.request("/nowhere")],
      ["405", await ctx.app.request("/healthz", { method: "DELETE" })],
      ["400", await ctx.request("/cdp/profiles?limit=0", brand.key)],
      [
        "preflight",
        await ctx.app.request("/cdp/events", {
          method: "OPTIONS",
          headers: { Origin: "https://x.example", "Access-Control-Request-Method": "POST" },
        }),
      ],
      ["docs", await ctx.app.request("/docs")],
      ["openapi", await ctx.app.request("/openapi.json")],
      ["webhook 401", await ctx.app.request("/webhooks/shopify", { method: "POST", body: "{}" })],
      [
        "pixel 403",
        await ctx.app.request("/cdp/ingest?shop=unknown.myshopify.com", {
          method: "POST",
          body: "{}",
        }),
      ],
      ["dashboard 401", await ctx.app.request("/app")],
      ["dashboard", await ctx.app.request(`/app/keys?s=${encodeURIComponent(s)}`)],
    ];
    for (const [what, res] of answers) {
      await res.body?.cancel();
      for (const [name, value] of Object.entries(SECURITY_HEADERS)) {
        assert.equal(res.headers.get(name), value, `${what} (${res.status}): ${name}`);
      }
    }
    const dashboard = answers.at(-1)![1];
    assert.equal(dashboard.status, 200);
    assert.match(dashboard.headers.get("content-security-policy")!, /frame-ancestors/);
    assert.equal(dashboard.headers.get("x-frame-options"), null);
  }, APP_ENV);
});

Deno.test("throttles: the API-wide limit has a brand-wide ceiling that more keys do not raise", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    const other = await ctx.seedBrand();
    const keys = [
      brand.key,
      await anotherKey(ctx, brand.brandId),
      await anotherKey(ctx, brand.brandId),
    ];
    // Two requests on each of two keys: each key is under its own limit of 3.
    for (const key of [keys[0]!, keys[0]!, keys[1]!, keys[1]!]) {
      assert.equal(await status(ctx.request("/cdp/events/types", key)), 200);
    }
    const limited = await ctx.request("/cdp/events/types", keys[2]!);
    assert.equal(limited.status, 429);
    assert.ok(Number(limited.headers.get("retry-after")) >= 1);
    const error = await errorBody(limited);
    assert.equal(error.error, "rate_limited");
    assert.match(error.error_description, /per brand/);
    // Another brand is not affected; the next window starts over.
    assert.equal(await status(ctx.request("/cdp/events/types", other.key)), 200);
    ctx.clock.advance(60_000);
    assert.equal(await status(ctx.request("/cdp/events/types", keys[2]!)), 200);
  }, { RATE_LIMIT_PER_MINUTE: "3", BRAND_RATE_LIMIT_PER_MINUTE: "4" });
});

Deno.test("throttles: the query throttle has a brand-wide ceiling too", async () => {
  await withContext(async (ctx) => {
    ctx.app.post("/cdp/query/:itemType/count", (c) => c.json({ count: 0 }));
    const brand = await ctx.seedBrand();
    const second = await anotherKey(ctx, brand.brandId);
    const query = (key: string) =>
      status(ctx.request("/cdp/query/profile/count", key, { method: "POST" }));
    assert.equal(await query(brand.key), 200);
    assert.equal(await query(brand.key), 200);
    assert.equal(await query(second), 200);
    assert.equal(await query(second), 429);
    assert.equal(await status(ctx.request("/cdp/events/types", second)), 200);
  }, { QUERY_RATE_LIMIT_PER_MINUTE: "2", BRAND_QUERY_RATE_LIMIT_PER_MINUTE: "3" });
});

Deno.test("throttles: the sync ingest throttle has a brand-wide ceiling too", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    const second = await anotherKey(ctx, brand.brandId);
    const sync = (key: string) =>
      ctx.request("/cdp/events?sync=true", key, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ events: [{ eventType: "page_viewed", profileId: "p1" }] }),
      });
    assert.equal(await status(sync(brand.key)), 200);
    assert.equal(await status(sync(brand.key)), 200);
    assert.equal(await status(sync(second)), 200);
    const throttled = await sync(second);
    assert.equal(throttled.status, 429);
    const error = await errorBody(throttled);
    assert.equal(error.error, "sync_throttled");
    assert.match(error.error_description, /per brand/);
  }, { SYNC_RATE_LIMIT_PER_MINUTE: "2", BRAND_SYNC_RATE_LIMIT_PER_MINUTE: "3" });
});
