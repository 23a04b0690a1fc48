import assert from "node:assert/strict";
import { setBrand } from "../../lib/tenancy/brands.ts";
import {
  errorBody,
  eventually,
  recordQueue,
  type TestContext,
  withContext,
} from "../test_support.ts";

function pixel(
  ctx: TestContext,
  shop: string,
  body: unknown,
  headers: Record<string, string> = {},
) {
  return ctx.app.request(`/cdp/ingest?shop=${encodeURIComponent(shop)}`, {
    method: "POST",
    headers: { "Content-Type": "application/json", Origin: `https://${shop}`, ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
}

const viewed = (profileId: string, extra: Record<string, unknown> = {}) => ({
  eventType: "page_viewed",
  profileId,
  properties: { url: "https://x/y" },
  ...extra,
});

Deno.test("pixel proxy: a connected shop's own origin is accepted, queued with pixel provenance", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    const queue = recordQueue(ctx.kv);
    const res = await pixel(ctx, brand.scope!, { events: [viewed("anon_1"), viewed("anon_2")] });
    assert.equal(res.status, 202);
    assert.equal(res.headers.get("access-control-allow-origin"), `https://${brand.scope}`);
    assert.match(res.headers.get("vary") ?? "", /Origin/);
    assert.deepEqual(await res.json(), { accepted: 2, rejected: [], scope: brand.scope });
    await eventually(() => queue.seen.length === 1);
    assert.equal(queue.seen[0]!.batch.source, "pixel");
    assert.equal(queue.seen[0]!.batch.scope, brand.scope);
    assert.equal(queue.seen[0]!.brandId, brand.brandId);
    // Applied, the profiles are pixel profiles.
    await ctx.deps.engine.applyEvents(queue.seen[0]!.batch);
    const rows = await ctx.sql`select provenance from profiles order by item_id`;
    assert.deepEqual(rows.map((r) => r.provenance), ["pixel", "pixel"]);
    ctx.kv.close();
    await queue.listening;
  });
});

Deno.test("pixel proxy: unknown, disconnected or disabled shops and foreign origins are one 403", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    const shop = brand.scope!;
    const body = { events: [viewed("anon_1")] };
    const refusals: [string, Record<string, string>][] = [
      ["unknown.myshopify.com", { Origin: "https://unknown.myshopify.com" }],
      ["not a shop", {}],
      [shop, { Origin: "https://evil.example" }],
      [shop, { Origin: `http://${shop}` }],
      [shop, { Origin: "null" }],
    ];
    for (const [target, headers] of refusals) {
      const res = await pixel(ctx, target, body, headers);
      assert.equal(res.status, 403, `${target} ${JSON.stringify(headers)}`);
      assert.equal((await errorBody(res)).error, "forbidden");
    }
    const noOrigin = await ctx.app.request(`/cdp/ingest?shop=${shop}`, {
      method: "POST",
      body: JSON.stringify(body),
    });
    assert.equal(noOrigin.status, 403);
    await noOrigin.body?.cancel();
    await setBrand(ctx.deps, { brandId: brand.brandId, integration: "disconnected" });
    assert.equal((await pixel(ctx, shop, body)).status, 403);
    await setBrand(ctx.deps, { brandId: brand.brandId, integration: "connected" });
    await ctx.sql`update integrations set is_enabled = false where shop_domain = ${shop}`;
    assert.equal((await pixel(ctx, shop, body)).status, 403);
  });
});

Deno.test("pixel proxy: a storefront's custom domain is allowed once listed", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    const custom = { Origin: "https://shop.acme.example" };
    assert.equal((await pixel(ctx, brand.scope!, { events: [viewed("a")] }, custom)).status, 403);
    await ctx.sql`
      update integrations set storefront_origins = array['https://shop.acme.example']
      where shop_domain = ${brand.scope}`;
    const res = await pixel(ctx, brand.scope!, { events: [viewed("a")] }, custom);
    assert.equal(res.status, 202);
    assert.equal(res.headers.get("access-control-allow-origin"), "https://shop.acme.example");
  });
});

Deno.test("pixel proxy: only pixel event types, never server identities, never a scope", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    const res = await pixel(ctx, brand.scope!, {
      events: [
        viewed("anon_1"),
        {
          eventType: "updateProperties",
          profileId: "anon_1",
          properties: { update: { "properties.email": "x@y.z" } },
        },
        { eventType: "order_created", profileId: "anon_1", properties: { orderId: "1" } },
        viewed("store_acme_42"),
        { eventType: "search_submitted", profileId: "anon_1", properties: { query: "tee" } },
      ],
    });
    assert.equal(res.status, 202);
    const body = await res.json();
    assert.equal(body.accepted, 2);
    assert.deepEqual(
      body.rejected.map((
        r: { index: number; errors: { path: string }[] },
      ) => [r.index, r.errors[0]!.path]),
      [[1, "$.events[1].eventType"], [2, "$.events[2].eventType"], [3, "$.events[3].profileId"]],
    );
    const bound = await pixel(ctx, brand.scope!, {
      events: [viewed("a", { properties: { shopDomain: "x" } })],
    });
    assert.equal(bound.status, 400);
    assert.equal((await errorBody(bound)).error, "scope_binding");
  });
});

Deno.test("pixel proxy: tighter size and batch limits", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    const big = await pixel(ctx, brand.scope!, {
      events: [viewed("a", { properties: { pad: "x".repeat(70_000) } })],
    });
    assert.equal(big.status, 413);
    assert.equal((await errorBody(big)).error, "payload_too_large");
    const many = await pixel(ctx, brand.scope!, {
      events: Array.from({ length: 21 }, (_, i) => viewed(`a${i}`)),
    });
    assert.equal(many.status, 400);
    assert.equal((await errorBody(many)).error, "batch_too_large");
    const malformed = await pixel(ctx, brand.scope!, "{");
    assert.equal((await errorBody(malformed)).error, "bad_request");
  });
});

Deno.test("pixel proxy: a per-client rate limit, keyed by the forwarded address behind a proxy", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    const from = (ip: string) =>
      pixel(ctx, brand.scope!, { events: [viewed("a")] }, { "X-Forwarded-For": `${ip}, 10.0.0.1` });
    for (let i = 0; i < 3; i++) assert.equal((await from("203.0.113.7")).status, 202);
    const limited = await from("203.0.113.7");
    assert.equal(limited.status, 429);
    assert.ok(Number(limited.headers.get("retry-after")) >= 1);
    assert.equal((await errorBody(limited)).error, "rate_limited");
    assert.equal((await from("198.51.100.2")).status, 202);
    ctx.clock.advance(60_000);
    assert.equal((await from("203.0.113.7")).status, 202);
  }, { PIXEL_RATE_LIMIT_PER_MINUTE: "3", TRUST_PROXY: "true" });
});

Deno.test("pixel proxy: needs no credential, answers preflight, and 405 for other methods", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    const preflight = await ctx.app.request(`/cdp/ingest?shop=${brand.scope}`, {
      method: "OPTIONS",
      headers: { Origin: `https://${brand.scope}`, "Access-Control-Request-Method": "POST" },
    });
    assert.equal(preflight.status, 204);
    const get = await ctx.app.request("/cdp/ingest");
    assert.equal(get.status, 405);
    assert.equal(get.headers.get("allow"), "POST, OPTIONS");
    await get.body?.cancel();
  });
});

Deno.test("pixel events never upgrade a server profile's provenance", async () => {
  await withContext(async (ctx) => {
    const scope = "acme.myshopify.com";
    const at = "2026-11-21T12:00:00Z";
    await ctx.deps.engine.applyEvents({
      scope,
      source: "server",
      receivedAt: at,
      events: [{ id: ctx.deps.newId(), eventType: "page_viewed", profileId: "cust_1" }],
    });
    await ctx.deps.engine.applyEvents({
      scope,
      source: "pixel",
      receivedAt: at,
      events: [{ id: ctx.deps.newId(), eventType: "page_viewed", profileId: "cust_1" }],
    });
    const [row] = await ctx.sql`select provenance from profiles where item_id = 'cust_1'`;
    assert.equal(row!.provenance, "server");
  });
});

Deno.test("pixel proxy: values storage cannot hold are rejected per event with their paths", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    const queue = recordQueue(ctx.kv);
    const res = await pixel(
      ctx,
      brand.scope!,
      String.raw`{"events":[
        {"eventType":"page_viewed","profileId":"anon_1","properties":{"url":"https://x/\u0000"}},
        {"eventType":"page_viewed","profileId":"anon_2","properties":{"url":"https://x/y"}},
        {"eventType":"page_viewed","profileId":"anon_3","properties":{"url":"https://x/\udc00"}}
      ]}`,
    );
    assert.equal(res.status, 202);
    const body = await res.json();
    assert.equal(body.accepted, 1);
    assert.deepEqual(
      body.rejected.map((r: { index: number; errors: { path: string }[] }) => [
        r.index,
        r.errors.map((e) => e.path),
      ]),
      [[0, ["$.events[0].properties.url"]], [2, ["$.events[2].properties.url"]]],
    );
    await eventually(() => queue.seen.length === 1);
    assert.deepEqual(queue.seen[0]!.batch.events.map((e) => e.profileId), ["anon_2"]);
    ctx.kv.close();
    await queue.listening;
  });
});

Deno.test("pixel proxy: every accepted field is stored as sent and read back (target.properties included)", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    const queue = recordQueue(ctx.kv);
    const sent = {
      eventType: "page_viewed",
      profileId: "anon_fid",
      sessionId: "s_fid",
      timeStamp: "2026-11-20T09:30:15.250Z",
      properties: { url: "https://x/home", context: { document: { title: "Home" } } },
      flattenedProperties: { "utm.source": "mail" },
      target: {
        itemId: "home",
        itemType: "page",
        properties: { pageInfo: { pagePath: "/home", referringURL: "https://r/", language: "en" } },
      },
    };
    assert.equal((await pixel(ctx, brand.scope!, { events: [sent] })).status, 202);
    await eventually(() => queue.seen.length === 1);
    await ctx.deps.engine.applyEvents(queue.seen[0]!.batch);
    const res = await ctx.request("/cdp/profiles/anon_fid/events", brand.key);
    assert.equal(res.status, 200);
    const [{ itemId: _id, ...stored }] = (await res.json()).list;
    assert.deepEqual(stored, { ...sent, source: "pixel", scope: brand.scope });
    ctx.kv.close();
    await queue.listening;
  });
});

Deno.test("pixel proxy: a body that is not UTF-8 is 400 bad_request, nothing queued", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    const queue = recordQueue(ctx.kv);
    const bytes = new Uint8Array([
      ...new TextEncoder().encode(
        `{"events":[{"eventType":"page_viewed","profileId":"anon_1","properties":{"url":"x`,
      ),
      0xff,
      ...new TextEncoder().encode(`"}}]}`),
    ]);
    const res = await ctx.app.request(`/cdp/ingest?shop=${brand.scope}`, {
      method: "POST",
      headers: { "Content-Type": "application/json", Origin: `https://${brand.scope}` },
      body: bytes,
    });
    assert.equal(res.status, 400);
    assert.deepEqual(await errorBody(res), {
      error: "bad_request",
      error_description: "body is not valid UTF-8",
    });
    assert.equal(queue.seen.length, 0);
    ctx.kv.close();
    await queue.listening;
  });
});
