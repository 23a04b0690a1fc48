import assert from "node:assert/strict";
import type { IngestEvent } from "../../lib/engine/engine.ts";
import { mintCursor } from "../../lib/http/cursors.ts";
import { errorBody, type TestContext, withContext } from "../test_support.ts";

type Brand = Awaited<ReturnType<TestContext["seedBrand"]>>;

async function apply(
  ctx: TestContext,
  scope: string,
  source: "server" | "pixel",
  events: Omit<IngestEvent, "id">[],
) {
  const results = await ctx.deps.engine.applyEvents({
    scope,
    source,
    receivedAt: ctx.clock.now().toISOString(),
    events: events.map((e) => ({ id: ctx.deps.newId(), ...e })),
  });
  assert.ok(results.every((r) => r.ok), JSON.stringify(results));
}

const identify = (profileId: string, update: Record<string, unknown>) => ({
  eventType: "updateProperties",
  profileId,
  properties: { update },
});

/** Two brands: A has 3 customers, 2 anonymous profiles and a merged one; B has one customer. */
async function seed(ctx: TestContext): Promise<{ a: Brand; b: Brand }> {
  const a = await ctx.seedBrand();
  const b = await ctx.seedBrand();
  await apply(ctx, a.scope!, "server", [
    identify("store_a_1", { "properties.email": "ann@example.com", "properties.firstName": "Ann" }),
    identify("store_a_2", { "properties.email": "bob@example.com", "properties.firstName": "Bob" }),
    identify("store_a_3", { "properties.email": "cy@example.com", "properties.lastName": "Annex" }),
    {
      eventType: "page_viewed",
      profileId: "store_a_1",
      sessionId: "s1",
      timeStamp: "2026-11-01T10:00:00Z",
    },
    {
      eventType: "product_viewed",
      profileId: "store_a_1",
      sessionId: "s1",
      timeStamp: "2026-11-02T10:00:00Z",
    },
    {
      eventType: "page_viewed",
      profileId: "store_a_1",
      sessionId: "s2",
      timeStamp: "2026-11-03T10:00:00Z",
    },
  ]);
  await apply(ctx, a.scope!, "pixel", [
    { eventType: "page_viewed", profileId: "anon_1", sessionId: "w1" },
    { eventType: "page_viewed", profileId: "anon_2", sessionId: "w2" },
    { eventType: "page_viewed", profileId: "anon_3", sessionId: "w3" },
  ]);
  // anon_3 logs in and shares store_a_3's identifier: they merge, and anon_3, created first,
  // survives; store_a_3 stays readable as an alias.
  await apply(ctx, a.scope!, "server", [
    identify("store_a_3", { "properties.mergeIdentifier": "cust-3" }),
    identify("anon_3", { "properties.mergeIdentifier": "cust-3" }),
  ]);
  await apply(ctx, b.scope!, "server", [
    identify("store_a_1", { "properties.email": "someone-else@example.com" }),
    { eventType: "page_viewed", profileId: "store_a_1", sessionId: "b1" },
  ]);
  return { a, b };
}

const ids = (body: { list: { itemId: string }[] }) => body.list.map((p) => p.itemId);

Deno.test("profiles: buckets never mix; identities and scope come with the page", async () => {
  await withContext(async (ctx) => {
    const { a } = await seed(ctx);
    const customers = await (await ctx.request("/cdp/profiles", a.key)).json();
    assert.equal(customers.bucket, "customers");
    assert.deepEqual(ids(customers), ["store_a_1", "store_a_2"]);
    assert.equal(customers.totalSize, 2);
    assert.equal(customers.scope, a.scope);
    assert.equal(customers.nextCursor, null);
    assert.deepEqual(customers.identities.store_a_1, {
      email: "ann@example.com",
      firstName: "Ann",
      shopDomain: a.scope,
    });
    const first = customers.list[0];
    assert.equal(first.provenance, "server");
    assert.equal(first.properties.nbOfVisits, 3);
    assert.equal(first.properties.firstVisit, "2026-11-01T10:00:00.000Z");
    const anonymous = await (await ctx.request("/cdp/profiles?bucket=anonymous", a.key)).json();
    assert.deepEqual(ids(anonymous), ["anon_1", "anon_2"]);
    const merged = await (await ctx.request("/cdp/profiles?bucket=merged", a.key)).json();
    assert.deepEqual(ids(merged), ["anon_3"]);
    const bad = await ctx.request("/cdp/profiles?bucket=everyone", a.key);
    assert.equal((await errorBody(bad)).error, "bad_request");
  });
});

Deno.test("profiles: q searches ids and identity fields, case-insensitively, literally", async () => {
  await withContext(async (ctx) => {
    const { a } = await seed(ctx);
    const search = async (q: string, bucket = "customers") =>
      ids(
        await (await ctx.request(
          `/cdp/profiles?bucket=${bucket}&q=${encodeURIComponent(q)}`,
          a.key,
        )).json(),
      );
    assert.deepEqual(await search("ANN"), ["store_a_1"]);
    assert.deepEqual(await search("annex", "merged"), ["anon_3"]);
    assert.deepEqual(await search("store_a_2"), ["store_a_2"]);
    assert.deepEqual(await search("%"), []);
    assert.deepEqual(await search("someone-else"), []);
  });
});

Deno.test("profiles: get by id or by a merged-away id; another brand's is 404 like a missing one", async () => {
  await withContext(async (ctx) => {
    const { a, b } = await seed(ctx);
    const res = await ctx.request("/cdp/profiles/store_a_1", a.key);
    assert.equal(res.status, 200);
    const body = await res.json();
    assert.deepEqual(Object.keys(body).sort(), ["identity", "profile", "scope"]);
    assert.equal(body.profile.properties.email, "ann@example.com");
    assert.deepEqual(body.identity, {
      email: "ann@example.com",
      firstName: "Ann",
      shopDomain: a.scope,
    });
    const viaAlias = await (await ctx.request("/cdp/profiles/store_a_3", a.key)).json();
    assert.equal(viaAlias.profile.itemId, "anon_3");
    assert.equal(viaAlias.profile.properties.email, "cy@example.com");
    assert.equal(viaAlias.profile.provenance, "merged");
    const missing = await ctx.request("/cdp/profiles/nobody", a.key);
    const foreign = await ctx.request("/cdp/profiles/anon_1", b.key);
    assert.equal(missing.status, 404);
    assert.equal(foreign.status, 404);
    assert.deepEqual(await errorBody(missing), await errorBody(foreign));
    // Same id, other brand: B sees only its own profile.
    const bView = await (await ctx.request("/cdp/profiles/store_a_1", b.key)).json();
    assert.equal(bView.profile.properties.email, "someone-else@example.com");
  });
});

Deno.test("profile events: this brand's only, with filters; a merged profile has both histories", async () => {
  await withContext(async (ctx) => {
    const { a, b } = await seed(ctx);
    const all = await (await ctx.request("/cdp/profiles/store_a_1/events", a.key)).json();
    assert.equal(all.totalSize, 4);
    const clamped = await (await ctx.request("/cdp/profiles/store_a_1/events?limit=500", a.key))
      .json();
    assert.equal(clamped.pageSize, 100);
    assert.ok(all.list.every((e: { scope: string }) => e.scope === a.scope));
    const bEvents = await (await ctx.request("/cdp/profiles/store_a_1/events", b.key)).json();
    assert.equal(bEvents.totalSize, 2);
    const typed =
      await (await ctx.request("/cdp/profiles/store_a_1/events?eventType=page_viewed", a.key))
        .json();
    assert.deepEqual(typed.list.map((e: { eventType: string }) => e.eventType), [
      "page_viewed",
      "page_viewed",
    ]);
    const window = await (await ctx.request(
      "/cdp/profiles/store_a_1/events?from=2026-11-02T00:00:00Z&to=2026-11-03T10:00:00Z&sort=timeStamp:asc",
      a.key,
    )).json();
    assert.deepEqual(window.list.map((e: { timeStamp: string }) => e.timeStamp), [
      "2026-11-02T10:00:00.000Z",
      "2026-11-03T10:00:00.000Z",
    ]);
    const merged = await (await ctx.request("/cdp/profiles/store_a_3/events", a.key)).json();
    assert.deepEqual(
      [...new Set(merged.list.map((e: { profileId: string }) => e.profileId))].sort(),
      ["anon_3", "store_a_3"],
    );
    assert.equal((await ctx.request("/cdp/profiles/nobody/events", a.key)).status, 404);
    const badDate = await ctx.request("/cdp/profiles/store_a_1/events?from=yesterday", a.key);
    assert.equal((await errorBody(badDate)).error, "bad_request");
  });
});

Deno.test("profile sessions: most recent first, moved to the survivor on merge", async () => {
  await withContext(async (ctx) => {
    const { a } = await seed(ctx);
    const sessions = await (await ctx.request("/cdp/profiles/store_a_1/sessions", a.key)).json();
    // The update without a sessionId opened a generated session (named by its first event).
    const ids = sessions.list.map((s: { itemId: string }) => s.itemId);
    assert.deepEqual(ids.slice(1), ["s2", "s1"]);
    assert.match(ids[0], /^store_a_1:\d{4}-\d\d-\d\dT[\d:.]+Z$/);
    assert.deepEqual(sessions.list[0].properties, {});
    assert.equal(sessions.list.find((s: { itemId: string }) => s.itemId === "s1").eventCount, 2);
    const merged = await (await ctx.request("/cdp/profiles/store_a_3/sessions", a.key)).json();
    const sessionIds = merged.list.map((s: { itemId: string }) => s.itemId);
    assert.ok(
      sessionIds.includes("w3") && sessionIds.some((id: string) => id.startsWith("store_a_3:")),
    );
  });
});

Deno.test("paging: limit clamps to 100, the offset window is 400, cursors walk every row", async () => {
  await withContext(async (ctx) => {
    const a = await ctx.seedBrand();
    await ctx.sql`
      insert into profiles (scope, item_id, properties, provenance, created_at, updated_at)
      select ${a.scope}, 'p' || lpad(i::text, 5, '0'), '{}'::jsonb, 'server', now(), now()
      from generate_series(1, 10050) as i`;
    const clamped = await (await ctx.request("/cdp/profiles?limit=500", a.key)).json();
    assert.equal(clamped.pageSize, 100);
    assert.equal(clamped.list.length, 100);
    assert.equal(clamped.totalSize, 10_000);
    const deep = await ctx.request("/cdp/profiles?offset=9990&limit=20", a.key);
    assert.equal(deep.status, 400);
    assert.match((await errorBody(deep)).error_description, /10000/);
    assert.equal((await ctx.request("/cdp/profiles?offset=9980&limit=20", a.key)).status, 200);
    for (const bad of ["limit=0", "limit=-1", "limit=x", "offset=-1"]) {
      assert.equal((await ctx.request(`/cdp/profiles?${bad}`, a.key)).status, 400, bad);
    }
    // Cursor pages are contiguous and ignore offset.
    const one = await (await ctx.request("/cdp/profiles?limit=3", a.key)).json();
    const two =
      await (await ctx.request(`/cdp/profiles?limit=3&offset=500&cursor=${one.nextCursor}`, a.key))
        .json();
    assert.deepEqual(ids(two), ["p00004", "p00005", "p00006"]);
    assert.equal(two.offset, 3);
    // Beyond the offset window a cursor still pages correctly, to the end.
    const binding = {
      brandId: a.brandId,
      route: "/cdp/profiles",
      resource: JSON.stringify(["customers", null]),
    };
    const cursor = await mintCursor({ ...ctx.deps, ttlMs: 60_000 }, binding, {
      after: "p10040",
      offset: 10040,
    });
    const tail = await (await ctx.request(`/cdp/profiles?limit=100&cursor=${cursor}`, a.key))
      .json();
    assert.equal(tail.list.length, 10);
    assert.equal(tail.list[0].itemId, "p10041");
    assert.equal(tail.nextCursor, null);
    // Other sorts page by offset only.
    const sorted =
      await (await ctx.request("/cdp/profiles?limit=3&sort=itemId.keyword:desc", a.key)).json();
    assert.deepEqual(ids(sorted), ["p10050", "p10049", "p10048"]);
    assert.equal(sorted.nextCursor, null);
  });
});

Deno.test("cursors: malformed, expired, other route, other filters, other profile and other brand", async () => {
  await withContext(async (ctx) => {
    const { a, b } = await seed(ctx);
    const page = await (await ctx.request("/cdp/profiles?limit=1", a.key)).json();
    const events = await (await ctx.request("/cdp/profiles/store_a_1/events?limit=1", a.key))
      .json();
    assert.ok(page.nextCursor && events.nextCursor);
    const expect = async (path: string, key: string, status: number, code: string) => {
      const res = await ctx.request(path, key);
      assert.equal(res.status, status, path);
      assert.equal((await errorBody(res)).error, code, path);
    };
    await expect("/cdp/profiles?cursor=garbage", a.key, 400, "bad_request");
    await expect(`/cdp/profiles?cursor=${events.nextCursor}`, a.key, 400, "bad_request");
    await expect(
      `/cdp/profiles?bucket=anonymous&cursor=${page.nextCursor}`,
      a.key,
      400,
      "bad_request",
    );
    await expect(
      `/cdp/profiles?sort=itemId.keyword:desc&cursor=${page.nextCursor}`,
      a.key,
      400,
      "bad_request",
    );
    await expect(`/cdp/profiles?cursor=${page.nextCursor}`, b.key, 403, "forbidden");
    await expect(
      `/cdp/profiles/store_a_2/events?cursor=${events.nextCursor}`,
      a.key,
      400,
      "bad_request",
    );
    await expect(
      `/cdp/profiles/store_a_1/events?eventType=page_viewed&cursor=${events.nextCursor}`,
      a.key,
      400,
      "bad_request",
    );
    await expect(
      `/cdp/profiles/store_a_1/events?cursor=${page.nextCursor}`,
      a.key,
      400,
      "bad_request",
    );
    assert.equal(
      (await ctx.request(`/cdp/profiles/store_a_1/events?cursor=${events.nextCursor}`, a.key))
        .status,
      200,
    );
    ctx.clock.advance(ctx.config.cursorTtlSeconds * 1000 + 1);
    await expect(`/cdp/profiles?cursor=${page.nextCursor}`, a.key, 400, "bad_request");
  });
});

Deno.test("profiles routes: auth, scope and methods", async () => {
  await withContext(async (ctx) => {
    const noScope = await ctx.seedBrand({ shop: null });
    assert.equal((await ctx.request("/cdp/profiles", null)).status, 401);
    assert.equal((await ctx.request("/cdp/profiles", noScope.key)).status, 403);
    assert.equal((await ctx.request("/cdp/profiles/x/events", noScope.key)).status, 403);
    const post = await ctx.app.request("/cdp/profiles", { method: "POST" });
    assert.equal(post.status, 405);
    assert.equal(post.headers.get("allow"), "GET, HEAD, OPTIONS");
    await post.body?.cancel();
    assert.equal(
      (await ctx.app.request("/cdp/profiles/x/sessions", { method: "DELETE" })).status,
      405,
    );
  });
});

Deno.test("profiles routes: a NUL or an unpaired surrogate in the path or query is 400", async () => {
  await withContext(async (ctx) => {
    const { a } = await seed(ctx);
    for (
      const path of [
        "/cdp/profiles/a%00b",
        "/cdp/profiles/%00",
        "/cdp/profiles/a%00b/events",
        "/cdp/profiles/a%00b/sessions",
        "/cdp/profiles?q=%00",
        "/cdp/profiles?q=a%00b&limit=5",
        "/cdp/profiles/store_a_1/events?eventType=%00",
        "/cdp/profiles?%00=1",
      ]
    ) {
      const res = await ctx.request(path, a.key);
      assert.equal(res.status, 400, path);
      const error = await errorBody(res);
      assert.equal(error.error, "bad_request", path);
      assert.match(error.error_description, /NUL character or an unpaired surrogate/);
    }
    // Percent-escapes that are not UTF-8 (a surrogate's CESU-8 bytes) stay escaped, as text.
    for (const path of ["/cdp/profiles/%ED%A0%80", "/cdp/profiles?q=%ED%A0%80"]) {
      const res = await ctx.request(path, a.key);
      assert.ok(res.status === 200 || res.status === 404, `${path}: ${res.status}`);
      await res.body?.cancel();
    }
    // A profile id with an ordinary escape is still found.
    assert.equal((await ctx.request("/cdp/profiles/store%5Fa%5F1", a.key)).status, 200);
  });
});
