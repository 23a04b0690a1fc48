import assert from "node:assert/strict";
import { setBrand } from "../../lib/tenancy/brands.ts";
import { createQueueHandler, startForwarder } from "../../lib/ingest/forwarder.ts";
import { listDeadLetters } from "../../lib/ingest/queue.ts";
import { PIXEL_NOT_ANONYMOUS } from "../../lib/engine/apply_events.ts";
import type { Rejection } from "../../lib/ingest/edge.ts";
import {
  errorBody,
  eventually,
  kvQueue,
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

Deno.test("pixel proxy: a connected shop and an unknown, disconnected or disabled one get the same answer", async () => {
  await withContext(async (ctx) => {
    const connected = await ctx.seedBrand();
    const disconnected = await ctx.seedBrand();
    const disabled = await ctx.seedBrand();
    await setBrand(ctx.deps, { brandId: disconnected.brandId, integration: "disconnected" });
    await ctx.sql`update integrations set is_enabled = false where shop_domain = ${disabled.scope}`;
    // A profile of the disconnected shop that is not anonymous: not the caller's to learn about.
    await ctx.deps.engine.applyEvents({
      scope: disconnected.scope!,
      source: "server",
      receivedAt: "2026-11-21T12:00:00Z",
      events: [{ id: ctx.deps.newId(), eventType: "page_viewed", profileId: "cust_1" }],
    });
    const queue = recordQueue(ctx.kv);
    const body = {
      events: [
        viewed("anon_1"),
        { eventType: "order_created", profileId: "anon_1", properties: { orderId: "1" } },
        viewed("cust_1"),
        viewed("store_x_1"),
      ],
    };
    const answer = async (shop: string) => {
      const res = await pixel(ctx, shop, body);
      const { scope, ...rest } = await res.json();
      assert.equal(scope, shop);
      // Every header alike, but the request id and the length (the scope is the shop's name).
      const headers = [...res.headers]
        .filter(([name]) => name !== "x-request-id" && name !== "content-length")
        .map(([name, value]) => [name, value.replaceAll(shop, "<shop>")]);
      return { status: res.status, headers, body: rest };
    };
    const expected = await answer(connected.scope!);
    assert.equal(expected.status, 202);
    assert.equal(expected.body.accepted, 2);
    for (const shop of ["unknown.myshopify.com", disconnected.scope!, disabled.scope!]) {
      assert.deepEqual(await answer(shop), expected, shop);
    }
    // Only the connected shop's events were queued: the others' are dropped.
    await eventually(() => queue.seen.length === 1);
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.deepEqual(queue.seen.map((m) => m.batch.scope), [connected.scope]);
    ctx.kv.close();
    await queue.listening;
  });
});

Deno.test("pixel proxy: an unknown shop shares the connected shops' rate limit and refusals", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    for (const shop of [brand.scope!, "unknown.myshopify.com"]) {
      for (let i = 0; i < 2; i++) {
        assert.equal((await pixel(ctx, shop, { events: [viewed("a")] })).status, 202);
      }
      const limited = await pixel(ctx, shop, { events: [viewed("a")] });
      assert.equal(limited.status, 429, shop);
      assert.equal((await errorBody(limited)).error, "rate_limited");
      ctx.clock.advance(60_000);
      const tooMany = await pixel(ctx, shop, {
        events: Array.from({ length: 21 }, (_, i) => viewed(`a${i}`)),
      });
      assert.equal((await errorBody(tooMany)).error, "batch_too_large", shop);
      const malformed = await pixel(ctx, shop, "{");
      assert.equal(malformed.status, 400, shop);
      await malformed.body?.cancel();
    }
  }, { PIXEL_RATE_LIMIT_PER_MINUTE: "2" });
});

Deno.test("pixel proxy: a foreign or missing origin is one 403, for a connected shop or not", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    const shop = brand.scope!;
    const body = { events: [viewed("anon_1")] };
    const refusals: [string, Record<string, string>][] = [
      ["not a shop", {}],
      ["not a shop", { Origin: "https://not a shop" }],
    ];
    for (const target of [shop, "unknown.myshopify.com"]) {
      refusals.push(
        [target, { Origin: "https://evil.example" }],
        [target, { Origin: `http://${target}` }],
        [target, { Origin: "null" }],
        [target, { Origin: `https://${target === shop ? "unknown.myshopify.com" : shop}` }],
      );
    }
    for (const [target, headers] of refusals) {
      const res = await pixel(ctx, target, body, headers);
      assert.equal(res.status, 403, `${target} ${JSON.stringify(headers)}`);
      assert.notEqual(res.headers.get("access-control-allow-origin"), headers.Origin);
      assert.equal((await errorBody(res)).error, "forbidden");
    }
    for (const target of [shop, "unknown.myshopify.com"]) {
      const noOrigin = await ctx.app.request(`/cdp/ingest?shop=${target}`, {
        method: "POST",
        body: JSON.stringify(body),
      });
      assert.equal(noOrigin.status, 403);
      await noOrigin.body?.cancel();
    }
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
    // Set by SQL by hand, the shop's origins are seen once the doors' cache has expired (30 s).
    assert.equal((await pixel(ctx, brand.scope!, { events: [viewed("a")] }, custom)).status, 403);
    ctx.clock.advance(30_000);
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
  }, { PIXEL_RATE_LIMIT_PER_MINUTE: "3", TRUST_PROXY: "2" });
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

/** Server-side ingest, applied before the answer. */
async function serverEvents(ctx: TestContext, key: string, events: unknown[]) {
  const res = await ctx.request("/cdp/events?sync=true", key, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ events }),
  });
  assert.equal(res.status, 200);
  const body = await res.json();
  assert.ok(body.results.every((r: { ok: boolean }) => r.ok), JSON.stringify(body));
}

async function readProfile(ctx: TestContext, key: string, id: string) {
  const res = await ctx.request(`/cdp/profiles/${id}`, key);
  assert.equal(res.status, 200);
  return (await res.json()).profile;
}

async function readEvents(ctx: TestContext, key: string, id: string) {
  const res = await ctx.request(`/cdp/profiles/${id}/events`, key);
  assert.equal(res.status, 200);
  return (await res.json()).list as { source: string; timeStamp: string }[];
}

Deno.test("pixel proxy: an event naming a server profile is refused with a reason; the batch's others proceed (finding 3)", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    await serverEvents(ctx, brand.key, [
      { eventType: "page_viewed", profileId: "cust_1", timeStamp: "2026-11-21T11:00:00Z" },
    ]);
    const before = await readProfile(ctx, brand.key, "cust_1");
    assert.equal(before.properties.nbOfVisits, 1);
    const forwarder = startForwarder({
      queue: ctx.queue,
      engine: ctx.deps.engine,
      now: ctx.clock.now,
    });
    // The review's reproduction: the shop's own Origin, a known id, a new session, year 2099.
    const res = await pixel(ctx, brand.scope!, {
      events: [
        viewed("anon_1"),
        viewed("cust_1", { sessionId: "px_1", timeStamp: "2099-01-01T00:00:00Z" }),
        viewed("anon_2"),
      ],
    });
    assert.equal(res.status, 202);
    assert.deepEqual(await res.json(), {
      accepted: 2,
      rejected: [{
        index: 1,
        errors: [{ path: "$.events[1].profileId", message: PIXEL_NOT_ANONYMOUS }],
      }],
      scope: brand.scope,
    });
    await eventually(async () =>
      (await ctx.sql`select count(*)::int as n from events where source = 'pixel'`)[0]!.n === 2
    );
    assert.deepEqual(await readProfile(ctx, brand.key, "cust_1"), before);
    assert.deepEqual((await readEvents(ctx, brand.key, "cust_1")).map((e) => e.source), ["server"]);
    ctx.kv.close();
    await forwarder;
  });
});

Deno.test("pixel proxy: merged profiles and ids absorbed by a merge are refused too", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    const forwarder = startForwarder({
      queue: ctx.queue,
      engine: ctx.deps.engine,
      now: ctx.clock.now,
    });
    assert.equal(
      (await pixel(ctx, brand.scope!, { events: [viewed("anon_m"), viewed("anon_a")] }))
        .status,
      202,
    );
    await eventually(async () =>
      (await ctx.sql`select count(*)::int as n from profiles`)[0]!.n === 2
    );
    // A server event names anon_m (now merged); another absorbs anon_a into store_x_1.
    await serverEvents(ctx, brand.key, [
      { eventType: "page_viewed", profileId: "anon_m" },
      {
        eventType: "page_viewed",
        profileId: "store_x_1",
        target: { itemId: "anon_a", itemType: "profile" },
      },
    ]);
    const res = await pixel(ctx, brand.scope!, {
      events: [viewed("anon_m"), viewed("anon_a"), viewed("anon_new")],
    });
    const body = await res.json();
    assert.equal(body.accepted, 1);
    assert.deepEqual(
      body.rejected.map((r: Rejection) => [r.index, r.errors[0]!.path, r.errors[0]!.message]),
      [
        [0, "$.events[0].profileId", PIXEL_NOT_ANONYMOUS],
        [1, "$.events[1].profileId", PIXEL_NOT_ANONYMOUS],
      ],
    );
    ctx.kv.close();
    await forwarder;
  });
});

Deno.test("pixel proxy: a profile identified between accept and apply is not written; the event is dead-lettered", async () => {
  const queueKv = await Deno.openKv(":memory:");
  await withContext(
    async (ctx) => {
      const brand = await ctx.seedBrand();
      const queue = recordQueue(queueKv);
      // Accepted while the id names nothing...
      const res = await pixel(ctx, brand.scope!, {
        events: [viewed("anon_r", { sessionId: "px_r", timeStamp: "2026-11-21T11:59:00Z" })],
      });
      assert.equal((await res.json()).accepted, 1);
      await eventually(() => queue.seen.length === 1);
      const message = queue.seen[0]!;
      queueKv.close();
      await queue.listening;
      // ...then the brand's server names it first.
      await serverEvents(ctx, brand.key, [
        { eventType: "page_viewed", profileId: "anon_r", timeStamp: "2026-11-21T10:00:00Z" },
      ]);
      const before = await readProfile(ctx, brand.key, "anon_r");
      assert.equal(before.provenance, "server");
      // The queued pixel batch reaches the forwarder.
      await createQueueHandler({
        queue: kvQueue(ctx.kv),
        engine: ctx.deps.engine,
        now: ctx.clock.now,
      })(
        message,
      );
      const letters = await listDeadLetters(ctx.kv, brand.brandId);
      assert.equal(letters.length, 1);
      assert.ok(letters[0]!.reason.endsWith(`: 403 ${PIXEL_NOT_ANONYMOUS}`), letters[0]!.reason);
      assert.equal(letters[0]!.message.batch.source, "pixel");
      assert.deepEqual(await readProfile(ctx, brand.key, "anon_r"), before);
      assert.deepEqual((await readEvents(ctx, brand.key, "anon_r")).map((e) => e.source), [
        "server",
      ]);
    },
    {},
    { queueKv },
  );
});

Deno.test("pixel proxy: client times are clamped to [received - 72 h, received + 5 min]", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    const forwarder = startForwarder({
      queue: ctx.queue,
      engine: ctx.deps.engine,
      now: ctx.clock.now,
    });
    // Received at 2026-11-21T12:00:00Z (the test clock).
    const res = await pixel(ctx, brand.scope!, {
      events: [
        viewed("anon_f", { sessionId: "f", timeStamp: "2099-01-01T00:00:00Z" }),
        viewed("anon_p", { sessionId: "p", timeStamp: "2001-01-01T00:00:00Z" }),
        viewed("anon_k", { sessionId: "k", timeStamp: "2026-11-20T09:30:15.250Z" }),
      ],
    });
    assert.equal((await res.json()).accepted, 3);
    await eventually(async () =>
      (await ctx.sql`select count(*)::int as n from events`)[0]!.n === 3
    );
    const times = async (id: string) => ({
      event: (await readEvents(ctx, brand.key, id))[0]!.timeStamp,
      lastVisit: (await readProfile(ctx, brand.key, id)).properties.lastVisit,
    });
    assert.deepEqual(await times("anon_f"), {
      event: "2026-11-21T12:05:00.000Z",
      lastVisit: "2026-11-21T12:05:00.000Z",
    });
    assert.deepEqual(await times("anon_p"), {
      event: "2026-11-18T12:00:00.000Z",
      lastVisit: "2026-11-18T12:00:00.000Z",
    });
    assert.deepEqual(await times("anon_k"), {
      event: "2026-11-20T09:30:15.250Z",
      lastVisit: "2026-11-20T09:30:15.250Z",
    });
    ctx.kv.close();
    await forwarder;
  });
});

Deno.test("pixel proxy: an event's properties.context gives its session the context's properties", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    const queue = recordQueue(ctx.kv);
    const context = {
      page: { url: `https://${brand.scope}/products/hat`, referrer: "https://t.co/x" },
      userAgent: "Mozilla/5.0 (iPad; CPU OS 17_6 like Mac OS X) AppleWebKit/605.1.15 (KHTML, " +
        "like Gecko) Version/17.6 Mobile/15E148 Safari/604.1",
    };
    const res = await pixel(ctx, brand.scope!, {
      events: [viewed("anon_ctx", { properties: { url: context.page.url, context } })],
    });
    assert.equal(res.status, 202);
    await eventually(() => queue.seen.length === 1);
    await ctx.deps.engine.applyEvents(queue.seen[0]!.batch);
    const [session] = await ctx.sql`select properties from sessions where profile_id = 'anon_ctx'`;
    assert.equal(session!.properties.referringURL, "https://t.co/x");
    assert.equal(session!.properties.landingPagePath, "/products/hat");
    assert.equal(session!.properties.deviceCategory, "tablet");
    ctx.kv.close();
    await queue.listening;
  });
});
