import assert from "node:assert/strict";
import { startForwarder } from "../../lib/ingest/forwarder.ts";
import { listRejectedMessages, rejectedCount } from "../../lib/ingest/rejected_messages.ts";
import { errorBody, eventually, type TestContext, withContext } from "../test_support.ts";

const basic = (key: string) => ({ Authorization: `Basic ${btoa(`${key}:`)}` });

function post(
  ctx: TestContext,
  path: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<Response> {
  return Promise.resolve(ctx.app.request(path, {
    method: "POST",
    headers: { "Content-Type": "application/json", ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  }));
}

async function withForwarder(ctx: TestContext, fn: () => Promise<void>) {
  const forwarder = startForwarder({
    queue: ctx.queue,
    engine: ctx.deps.engine,
    now: ctx.clock.now,
  });
  try {
    await fn();
    // Redelivered duplicates may still be on their way: let them finish before closing.
    await ctx.queue.drained();
  } finally {
    ctx.kv.close();
    await forwarder;
  }
}

const countEvents = async (ctx: TestContext) =>
  (await ctx.sql`select count(*)::int as n from events`)[0]!.n as number;

Deno.test("segment: track, identify, page, group, alias (long and short forms) are stored and read back", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    await withForwarder(ctx, async () => {
      const h = basic(brand.key);
      const sends: [string, unknown][] = [
        ["/v1/page", {
          anonymousId: "anon-1",
          name: "Home",
          properties: { url: "https://x.test/" },
        }],
        ["/v1/identify", {
          userId: "user-1",
          anonymousId: "anon-1",
          traits: { email: "peter@example.com", first_name: "Peter", address: { city: "Paris" } },
          messageId: "m-identify",
        }],
        ["/v1/t", {
          userId: "user-1",
          event: "Order Completed",
          properties: { order_id: "o-1", total: 10, currency: "eur" },
          messageId: "m-order",
        }],
        ["/v1/track", { userId: "user-1", event: "Signed Up", messageId: "m-signup" }],
        ["/v1/g", { userId: "user-1", groupId: "g-1", traits: { name: "Initech" } }],
        ["/v1/alias", { userId: "user-1", previousId: "old-id" }],
        ["/v1/s", { userId: "user-1", name: "Settings" }],
      ];
      for (const [index, [path, body]] of sends.entries()) {
        const res = await post(ctx, path, body, h);
        assert.equal(res.status, 200, path);
        assert.deepEqual(await res.json(), { success: true }, path);
        // Separate requests are applied in no promised order: the anonymous page is stored
        // before the identify that merges its profile, as a browser's would usually be.
        if (index === 0) await eventually(async () => (await countEvents(ctx)) === 1);
      }
      await eventually(async () => (await countEvents(ctx)) === sends.length);
      const profile = await (await ctx.request("/cdp/profiles/user-1", brand.key)).json();
      const text = JSON.stringify(profile);
      assert.ok(text.includes("peter@example.com"), text);
      assert.ok(text.includes("Paris"), text);
      assert.ok(text.includes("g-1"), text);
      const rows = await ctx.sql<{ id: string; event_type: string; profile_id: string }[]>`
        select id, event_type, profile_id from events order by time_stamp, id`;
      const types = rows.map((r) => r.event_type).sort();
      assert.deepEqual(types, [
        "alias",
        "checkout_completed",
        "page_viewed",
        "screen_viewed",
        "track",
        "updateProperties",
        "updateProperties",
      ]);
      assert.ok(rows.some((r) => r.id === "m-order"));
      // The anonymous profile was merged into the user's: its history reads under the user.
      const events = await (await ctx.request("/cdp/profiles/user-1/events", brand.key)).json();
      assert.ok(JSON.stringify(events).includes("page_viewed"), JSON.stringify(events));
      // A track's original name is selectable in conditions.
      const count = await ctx.request("/cdp/query/event/count", brand.key, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({
          condition: {
            type: "eventPropertyCondition",
            parameterValues: {
              propertyName: "properties.event",
              comparisonOperator: "equals",
              propertyValue: "Signed Up",
            },
          },
        }),
      });
      assert.equal(count.status, 200);
      assert.equal((await count.json()).count, 1);
      const anon = await ctx.sql`select provenance from profiles where item_id = 'user-1'`;
      assert.equal(anon[0]!.provenance, "merged");
    });
  });
});

Deno.test("segment: an anonymous-only message makes an anonymous profile", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    await withForwarder(ctx, async () => {
      const res = await post(ctx, "/v1/track", { anonymousId: "a-9", event: "Product Viewed" }, {
        Authorization: `Bearer ${brand.key}`,
      });
      assert.equal(res.status, 200);
      await eventually(async () => (await countEvents(ctx)) === 1);
      const rows = await ctx.sql`select provenance from profiles where item_id = 'a-9'`;
      assert.equal(rows[0]!.provenance, "pixel");
    });
  });
});

Deno.test("segment: a message sent twice (same messageId) is stored once", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    await withForwarder(ctx, async () => {
      const msg = { userId: "u", event: "Clicked", messageId: "dup-1" };
      for (let i = 0; i < 2; i++) {
        assert.equal((await post(ctx, "/v1/track", msg, basic(brand.key))).status, 200);
      }
      const marker = { userId: "u", event: "Marker", messageId: "marker" };
      assert.equal((await post(ctx, "/v1/track", marker, basic(brand.key))).status, 200);
      await eventually(async () =>
        (await ctx.sql`select count(*)::int as n from events where id = 'marker'`)[0]!.n === 1
      );
      assert.equal(await countEvents(ctx), 2);
    });
  });
});

Deno.test("segment: batch with gzip, text/plain and writeKey; a bad message refused alone; skew corrected", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    await withForwarder(ctx, async () => {
      const now = ctx.clock.now().getTime();
      const body = JSON.stringify({
        writeKey: brand.key,
        // The client's clock is an hour ahead.
        sentAt: new Date(now + 3600_000).toISOString(),
        batch: [
          {
            type: "track",
            userId: "u-b",
            event: "Product Added",
            timestamp: new Date(now + 3600_000 - 5000).toISOString(),
            messageId: "b-1",
          },
          { type: "track", userId: "bad:id", event: "X" },
          { type: "track", userId: "u-b", event: "Big", properties: { x: "y".repeat(40_000) } },
          { type: "identify", userId: "u-b", traits: { plan: "pro" }, messageId: "b-2" },
        ],
      });
      const gz = new Uint8Array(
        await new Response(
          new Blob([body]).stream().pipeThrough(new CompressionStream("gzip")),
        ).arrayBuffer(),
      );
      const res = await ctx.app.request("/v1/batch", {
        method: "POST",
        headers: { "Content-Type": "text/plain", "Content-Encoding": "gzip" },
        body: gz,
      });
      assert.equal(res.status, 200);
      const answer = await res.json();
      assert.equal(answer.success, true);
      assert.deepEqual(answer.rejected.map((r: { index: number }) => r.index), [1, 2]);
      // Kept for an operator (health page, `rejected list`), not only in an answer SDKs ignore.
      assert.equal(await rejectedCount(ctx.kv, brand.brandId), 2);
      const kept = await listRejectedMessages(ctx.kv, brand.brandId, 10);
      assert.deepEqual(kept.map((m) => [m.door, m.index, m.errors[0]!.path]), [
        ["POST /v1/batch", 2, "$.batch[2]"],
        ["POST /v1/batch", 1, "$.batch[1].userId"],
      ]);
      assert.ok(!JSON.stringify(kept).includes(brand.key));
      await eventually(async () => (await countEvents(ctx)) === 2);
      const [row] = await ctx.sql<{ time_stamp: Date }[]>`
        select time_stamp from events where id = 'b-1'`;
      assert.equal(new Date(row!.time_stamp).getTime(), now - 5000);
    });
  });
});

Deno.test("segment: missing or wrong key is 401; invalid JSON and oversized requests are 400", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    const none = await post(ctx, "/v1/track", { userId: "u", event: "X" });
    assert.equal(none.status, 401);
    assert.equal((await errorBody(none)).error, "unauthorized");
    const wrong = await post(ctx, "/v1/track", { userId: "u", event: "X" }, basic("svc_nope"));
    assert.equal(wrong.status, 401);
    assert.equal((await errorBody(wrong)).error, "unauthorized");
    const badJson = await post(ctx, "/v1/track", "{nope", basic(brand.key));
    assert.equal(badJson.status, 400);
    assert.equal((await errorBody(badJson)).error, "bad_request");
    const big = await post(
      ctx,
      "/v1/batch",
      { batch: [{ x: "y".repeat(600_000) }] },
      basic(brand.key),
    );
    assert.equal(big.status, 400);
    await errorBody(big);
    const bomb = new Uint8Array(
      await new Response(
        new Blob([new Uint8Array(2_000_000)]).stream().pipeThrough(new CompressionStream("gzip")),
      ).arrayBuffer(),
    );
    const inflated = await ctx.app.request("/v1/batch", {
      method: "POST",
      headers: { ...basic(brand.key), "Content-Encoding": "gzip" },
      body: bomb,
    });
    assert.equal(inflated.status, 400);
    await errorBody(inflated);
  });
});

Deno.test("segment: CORS preflight allows Authorization and X-Retry-Count", async () => {
  await withContext(async (ctx) => {
    const res = await ctx.app.request("/v1/t", {
      method: "OPTIONS",
      headers: {
        Origin: "https://shop.example",
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization,content-type,x-retry-count",
      },
    });
    assert.ok(res.status === 204 || res.status === 200, String(res.status));
    const allowed = (res.headers.get("access-control-allow-headers") ?? "").toLowerCase();
    assert.ok(allowed.includes("authorization") && allowed.includes("x-retry-count"), allowed);
  });
});

Deno.test("segment: the settings document points analytics.js back at this service", async () => {
  await withContext(async (ctx) => {
    const res = await ctx.app.request("http://cdp.test:8000/v1/projects/svc_abc/settings");
    assert.equal(res.status, 200);
    const body = await res.json();
    assert.deepEqual(
      {
        ...body.integrations["Segment.io"],
        unbundledIntegrations: undefined,
        addBundledMetadata: undefined,
      },
      {
        apiKey: "svc_abc",
        apiHost: "cdp.test:8000/v1",
        protocol: "http",
        unbundledIntegrations: undefined,
        addBundledMetadata: undefined,
      },
    );
  });
});

// Apache Unomi's built-in rule, as shipped in apache/unomi's
// services/src/main/resources/META-INF/cxs/rules/sessionReferrer.json (tests/fixtures/unomi).
const SESSION_REFERRER_RULE = JSON.parse(
  await Deno.readTextFile(new URL("../fixtures/unomi/sessionReferrer.json", import.meta.url)),
);

Deno.test("segment: a session carries its first event's context, shown and selectable; Unomi's sessionReferrer condition runs unchanged", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    await withForwarder(ctx, async () => {
      const h = basic(brand.key);
      const at = (minutes: number) =>
        new Date(ctx.clock.now().getTime() + minutes * 60_000).toISOString();
      const context = {
        page: {
          url: "https://acme.example/sale?utm_source=news&utm_campaign=fall",
          path: "/sale",
          referrer: "https://www.google.com/",
        },
        userAgent: "Mozilla/5.0 (iPhone; CPU iPhone OS 17_6 like Mac OS X) AppleWebKit/605.1.15 " +
          "(KHTML, like Gecko) Version/17.6 Mobile/15E148 Safari/604.1",
        ip: "203.0.113.9",
      };
      const res = await post(ctx, "/v1/batch", {
        batch: [
          // Sent out of order: the landing page is the earliest, not the first sent.
          { type: "track", anonymousId: "a-1", event: "Clicked", timestamp: at(5) },
          { type: "page", anonymousId: "a-1", context, timestamp: at(0) },
          // Another visitor, no referrer: the rule's condition matches its page view.
          { type: "page", userId: "u-2", timestamp: at(0), properties: { path: "/" } },
        ],
      }, h);
      assert.equal(res.status, 200);
      await eventually(async () => (await countEvents(ctx)) === 3);

      const sessions = await (await ctx.request("/cdp/profiles/a-1/sessions", brand.key)).json();
      assert.equal(sessions.list.length, 1);
      assert.equal(sessions.list[0].eventCount, 2);
      assert.deepEqual(sessions.list[0].properties, {
        landingPageURL: context.page.url,
        landingPagePath: "/sale",
        referringURL: "https://www.google.com/",
        utmSource: "news",
        utmCampaign: "fall",
        userAgentName: "Safari",
        userAgentVersion: "17.6",
        userAgentNameAndVersion: "Safari@@17.6",
        operatingSystemName: "iOS",
        deviceCategory: "mobile",
      });

      const count = async (itemType: string, condition: unknown) => {
        const answer = await ctx.request(`/cdp/query/${itemType}/count`, brand.key, {
          method: "POST",
          headers: { "Content-Type": "application/json" },
          body: JSON.stringify({ condition }),
        });
        assert.equal(answer.status, 200, JSON.stringify(await answer.clone().json()));
        return (await answer.json()).count;
      };
      const session = (propertyName: string, propertyValue: string) => ({
        type: "sessionPropertyCondition",
        parameterValues: { propertyName, comparisonOperator: "equals", propertyValue },
      });
      assert.equal(
        await count("profile", session("properties.referringURL", context.page.referrer)),
        1,
      );
      assert.equal(await count("profile", session("properties.deviceCategory", "mobile")), 1);
      assert.equal(await count("event", session("properties.utmCampaign", "fall")), 2);
      // The rule's condition, unchanged: page views whose session has no referringURL.
      assert.equal(await count("event", SESSION_REFERRER_RULE.condition), 1);
      // Unomi's own page views (type view, the path in target.properties.pageInfo) count too.
      const unomiView = await ctx.request("/cdp/events?sync=true", brand.key, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({
          events: [{
            eventType: "view",
            profileId: "v-1",
            target: {
              itemId: "home",
              itemType: "page",
              properties: { pageInfo: { pagePath: "/" } },
            },
          }],
        }),
      });
      assert.equal(unomiView.status, 200, await unomiView.clone().text());
      const view = { type: "pageViewEventCondition", parameterValues: { pagePath: "/" } };
      assert.equal(await count("event", view), 2);
      assert.equal(await count("event", { type: "pageViewEventCondition" }), 3);
      const language = await ctx.request("/cdp/query/event/count", brand.key, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({
          condition: { type: "pageViewEventCondition", parameterValues: { language: "en" } },
        }),
      });
      assert.equal(language.status, 400);
    });
  });
});
