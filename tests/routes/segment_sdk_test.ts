// The real SDKs, unchanged, against the service over a real port: Segment's analytics-node
// (option `host`) and RudderStack's rudder-sdk-node (option `dataPlaneUrl`, gzip by default).
import assert from "node:assert/strict";
import { Analytics } from "@segment/analytics-node";
// Not in deno.json's imports: a dependency of it has a build script, and Deno warns of every such
// package in the import map on each task run of a fresh checkout. Only this test loads it.
// deno-lint-ignore no-import-prefix
import RudderAnalytics from "npm:@rudderstack/rudder-sdk-node@3.0.13";
import { startForwarder } from "../../lib/ingest/forwarder.ts";
import { eventually, type TestContext, withContext } from "../test_support.ts";

async function serving(ctx: TestContext, fn: (base: string) => Promise<void>) {
  const server = Deno.serve({ port: 0, hostname: "127.0.0.1", onListen() {} }, ctx.app.fetch);
  const forwarder = startForwarder({
    queue: ctx.queue,
    engine: ctx.deps.engine,
    now: ctx.clock.now,
  });
  try {
    await fn(`http://127.0.0.1:${server.addr.port}`);
  } finally {
    await server.shutdown();
    ctx.kv.close();
    await forwarder;
  }
}

async function readBack(ctx: TestContext, key: string, profileId: string) {
  const profile = await (await ctx.request(`/cdp/profiles/${profileId}`, key)).json();
  const events = await (await ctx.request(`/cdp/profiles/${profileId}/events`, key)).json();
  return { profile: JSON.stringify(profile), events: JSON.stringify(events) };
}

Deno.test("sdk: @segment/analytics-node delivers identify, track, page, group and alias", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    await serving(ctx, async (base) => {
      const analytics = new Analytics({ writeKey: brand.key, host: base, flushAt: 1 });
      analytics.identify({
        userId: "seg-user",
        anonymousId: "seg-anon",
        traits: { email: "seg@example.com", firstName: "Seg" },
      });
      analytics.track({
        userId: "seg-user",
        event: "Order Completed",
        properties: { order_id: "o-42", total: 12.5, currency: "USD" },
      });
      analytics.page({ userId: "seg-user", name: "Home", properties: { url: "https://x.test/" } });
      analytics.group({ userId: "seg-user", groupId: "g-42", traits: { name: "Initech" } });
      analytics.alias({ userId: "seg-user", previousId: "seg-old" });
      await analytics.closeAndFlush({ timeout: 20_000 });
      await eventually(async () =>
        (await ctx.sql`select count(*)::int as n from events`)[0]!.n === 5
      );
      const { profile, events } = await readBack(ctx, brand.key, "seg-user");
      assert.ok(profile.includes("seg@example.com"), profile);
      assert.ok(profile.includes("g-42"), profile);
      for (const type of ["checkout_completed", "page_viewed", "alias", "updateProperties"]) {
        assert.ok(events.includes(type), `${type}: ${events}`);
      }
    });
  });
});

Deno.test("sdk: @rudderstack/rudder-sdk-node delivers identify, track and page (gzip)", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    await serving(ctx, async (base) => {
      const client = new RudderAnalytics(brand.key, { dataPlaneUrl: base, flushAt: 1 });
      const done = (name: string) => (err?: unknown) => {
        if (err) throw new Error(`${name}: ${err}`);
      };
      client.identify({
        userId: "rs-user",
        anonymousId: "rs-anon",
        traits: { email: "rs@example.com", phone: "555" },
      }, done("identify"));
      client.track({
        userId: "rs-user",
        event: "Product Viewed",
        properties: { product_id: "p-1", price: 3 },
      }, done("track"));
      client.page({ userId: "rs-user", name: "Pricing" }, done("page"));
      await client.flush();
      await eventually(async () =>
        (await ctx.sql`select count(*)::int as n from events`)[0]!.n === 3
      );
      const { profile, events } = await readBack(ctx, brand.key, "rs-user");
      assert.ok(profile.includes("rs@example.com"), profile);
      assert.ok(events.includes("product_viewed"), events);
      assert.ok(events.includes("page_viewed"), events);
    });
  });
});
